package verify

const tokenBody = `{"id":"e-1","type":"backup.finished","size":1024}`

var _ = providerTest("token", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://www.rfc-editor.org/rfc/rfc6750#section-2.1: the token is sent as Authorization: Bearer",
		cfg:    Config{Scheme: "token", Secrets: []string{genericSecret}},
		req:    post(tokenBody, "Authorization", "Bearer "+genericSecret),
		now:    testNow,
		want:   Result{DeliveryID: "e-1", Event: "backup.finished"},
	}},
	notes: "a token does not cover the body",
})
