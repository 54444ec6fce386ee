package verify

const herokuBody = `{"resource":"release","action":"create","data":{"app":{"name":"my-app"},"description":"Deploy abc123"}}`

var _ = providerTest("heroku", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://devcenter.heroku.com/articles/app-webhooks#securing-webhook-requests: Heroku-Webhook-Hmac-SHA256: <base64 HMAC-SHA256(body)>, with a fixed secret",
		cfg:    Config{Scheme: "heroku", Secrets: []string{genericSecret}},
		req:    post(herokuBody, "Heroku-Webhook-Hmac-SHA256", ""+b64MAC(sha256H, genericSecret, herokuBody), "Heroku-Webhook-Id", "e9f51e1f"),
		now:    testNow,
		want:   Result{DeliveryID: "e9f51e1f", Event: "release.create"},
	}},
})
