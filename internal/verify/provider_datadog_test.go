package verify

const datadogBody = `{"id":"7331946123456","event_type":"query_alert_monitor","title":"[Triggered] CPU high on web-1","body":"CPU above 90%","date":"1700000000000"}`

var _ = providerTest("datadog", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://docs.datadoghq.com/integrations/webhooks/: the token is sent as Authorization: Bearer",
		cfg:    Config{Scheme: "datadog", Secrets: []string{genericSecret}},
		req:    post(datadogBody, "Authorization", "Bearer "+genericSecret),
		now:    testNow,
		want:   Result{DeliveryID: "7331946123456", Event: "query_alert_monitor"},
	}},
	notes: "a token does not cover the body",
})
