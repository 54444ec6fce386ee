package verify

const bitbucketBody = `{"repository":{"full_name":"team/repo"},"actor":{"display_name":"Ann"},"push":{"changes":[]}}`

var _ = providerTest("bitbucket", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/#Secure-webhooks: X-Hub-Signature: sha256=<hex HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "bitbucket", Secrets: []string{genericSecret}},
		req:    post(bitbucketBody, "X-Hub-Signature", "sha256="+hexMAC(sha256H, genericSecret, bitbucketBody), "X-Request-UUID", "fe2a-41bd", "X-Event-Key", "repo:push"),
		now:    testNow,
		want:   Result{DeliveryID: "fe2a-41bd", Event: "repo:push"},
	}},
})
