package verify

const sentryBody = `{"action":"created","data":{"issue":{"id":"1","title":"ZeroDivisionError: division by zero"}},"actor":{"type":"application"}}`

var _ = providerTest("sentry", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://docs.sentry.io/organization/integrations/integration-platform/webhooks/#sentry-hook-signature: Sentry-Hook-Signature: <hex HMAC-SHA256(body)> under the client secret, with a fixed secret",
		cfg:    Config{Scheme: "sentry", Secrets: []string{genericSecret}},
		req:    post(sentryBody, "Sentry-Hook-Signature", ""+hexMAC(sha256H, genericSecret, sentryBody), "Request-ID", "a8bd2d1b-5a5e-4b10-8a14-4b4e8e2a3a63", "Sentry-Hook-Resource", "issue"),
		now:    testNow,
		want:   Result{DeliveryID: "a8bd2d1b-5a5e-4b10-8a14-4b4e8e2a3a63", Event: "issue.created"},
	}},
})
