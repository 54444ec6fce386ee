package verify

const alertmanagerBody = `{"version":"4","groupKey":"{}:{alertname=\"HighLatency\"}","status":"firing","receiver":"agent","commonLabels":{"alertname":"HighLatency"},"commonAnnotations":{"summary":"p99 above 2s"},"alerts":[]}`

var _ = providerTest("alertmanager", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://prometheus.io/docs/alerting/latest/configuration/#webhook_config: the token is sent as Authorization: Bearer",
		cfg:    Config{Scheme: "alertmanager", Secrets: []string{genericSecret}},
		req:    post(alertmanagerBody, "Authorization", "Bearer "+genericSecret),
		now:    testNow,
		want:   Result{DeliveryID: bodyID(alertmanagerBody), Event: "firing"},
	}},
	notes: "a token does not cover the body",
})
