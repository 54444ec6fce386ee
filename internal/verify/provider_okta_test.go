package verify

const oktaBody = `{"eventType":"com.okta.event_hook","eventId":"b5a188b9-5ece-4636-b041-482ffda96311","data":{"events":[{"eventType":"user.session.start","displayMessage":"User login to Okta","actor":{"alternateId":"ann@example.com"}}]}}`

var _ = providerTest("okta", providerTests{
	vectors: []vector{{
		name:   "user.session.start",
		source: "computed from https://developer.okta.com/docs/concepts/event-hooks/: the configured Authorization header value",
		cfg:    Config{Scheme: "okta", Secrets: []string{genericSecret}},
		req:    post(oktaBody, "Authorization", genericSecret),
		now:    testNow,
		want:   Result{DeliveryID: "b5a188b9-5ece-4636-b041-482ffda96311", Event: "user.session.start"},
	}},
	handshakes: []handshakeCase{{
		name:   "one-time verification",
		source: "computed from https://developer.okta.com/docs/concepts/event-hooks/#one-time-verification-request: answer {\"verification\": the X-Okta-Verification-Challenge value}",
		req:    req("GET", hookURL, "", "Authorization", genericSecret, "X-Okta-Verification-Challenge", "njSMsRt6Bq3D4uzGvCK7"),
		status: 200, ctype: "application/json", body: `{"verification":"njSMsRt6Bq3D4uzGvCK7"}`,
	}, {
		name:     "verification without the token",
		req:      req("GET", hookURL, "", "X-Okta-Verification-Challenge", "njSMsRt6Bq3D4uzGvCK7"),
		wantFail: ReasonMissingSignature,
	}},
	notes: "a token does not cover the body",
})
