package verify

const uptimekumaBody = `{"heartbeat":{"status":0,"msg":"timeout","time":"2024-01-01 00:00:00"},"monitor":{"name":"api","url":"https://api.example.com"},"msg":"[api] [DOWN] timeout"}`

var _ = providerTest("uptimekuma", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://github.com/louislam/uptime-kuma/wiki/Notification-Methods: the token is sent as Authorization: Bearer",
		cfg:    Config{Scheme: "uptimekuma", Secrets: []string{genericSecret}},
		req:    post(uptimekumaBody, "Authorization", "Bearer "+genericSecret),
		now:    testNow,
		want:   Result{DeliveryID: bodyID(uptimekumaBody), Event: "down"},
	}},
	notes: "a token does not cover the body",
})
