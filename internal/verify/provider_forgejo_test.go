package verify

const forgejoBody = `{"ref":"refs/heads/main","repository":{"full_name":"org/repo"},"sender":{"login":"ann"}}`

var _ = providerTest("forgejo", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://forgejo.org/docs/latest/user/webhooks/: X-Forgejo-Signature: <hex HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "forgejo", Secrets: []string{genericSecret}},
		req:    post(forgejoBody, "X-Forgejo-Signature", ""+hexMAC(sha256H, genericSecret, forgejoBody), "X-Forgejo-Delivery", "d1", "X-Forgejo-Event", "push"),
		now:    testNow,
		want:   Result{DeliveryID: "d1", Event: "push"},
	}},
})
