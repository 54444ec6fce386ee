package verify

const giteaBody = `{"ref":"refs/heads/main","repository":{"full_name":"org/repo"},"sender":{"login":"ann"}}`

var _ = providerTest("gitea", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://docs.gitea.com/usage/webhooks: X-Gitea-Signature: <hex HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "gitea", Secrets: []string{genericSecret}},
		req:    post(giteaBody, "X-Gitea-Signature", ""+hexMAC(sha256H, genericSecret, giteaBody), "X-Gitea-Delivery", "f6266f16-1bf3-46a5-9ea4-602e06ead473", "X-Gitea-Event", "push"),
		now:    testNow,
		want:   Result{DeliveryID: "f6266f16-1bf3-46a5-9ea4-602e06ead473", Event: "push"},
	}},
})
