package verify

const jiraBody = `{"webhookEvent":"jira:issue_created","issue":{"key":"PROJ-1","fields":{"summary":"Login fails"}},"user":{"displayName":"Ann"}}`

var _ = providerTest("jira", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://developer.atlassian.com/cloud/jira/platform/webhooks/#secure-admin-webhooks: X-Hub-Signature: sha256=<hex HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "jira", Secrets: []string{genericSecret}},
		req:    post(jiraBody, "X-Hub-Signature", "sha256="+hexMAC(sha256H, genericSecret, jiraBody), "X-Atlassian-Webhook-Identifier", "5b7d8d2a"),
		now:    testNow,
		want:   Result{DeliveryID: "5b7d8d2a", Event: "jira:issue_created"},
	}},
})
