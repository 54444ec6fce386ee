package verify

const grafanaBody = `{"receiver":"agent","status":"firing","title":"[FIRING:1] HighCPU","message":"CPU above 90% on web-1","alerts":[{"status":"firing","labels":{"alertname":"HighCPU"}}]}`

var _ = providerTest("grafana", providerTests{
	vectors: []vector{{
		name:   "firing, with a timestamp header",
		source: "computed from https://grafana.com/docs/grafana/latest/alerting/configure-notifications/manage-contact-points/integrations/webhook-notifier/: hex HMAC-SHA256 of timestamp:body",
		cfg:    Config{Scheme: "grafana", Secrets: []string{genericSecret}, TimestampHeader: "X-Grafana-Alerting-Signature-Timestamp"},
		req: post(grafanaBody, "X-Grafana-Alerting-Signature-Timestamp", ts(0),
			"X-Grafana-Alerting-Signature", hexMAC(sha256H, genericSecret, ts(0), ":", grafanaBody)),
		now:  testNow,
		want: Result{DeliveryID: bodyID(grafanaBody), Event: "firing"},
	}, {
		name:   "firing, body only",
		source: "computed from https://grafana.com/docs/grafana/latest/alerting/configure-notifications/manage-contact-points/integrations/webhook-notifier/: hex HMAC-SHA256 of the body",
		cfg:    Config{Scheme: "grafana", Secrets: []string{genericSecret}},
		req:    post(grafanaBody, "X-Grafana-Alerting-Signature", hexMAC(sha256H, genericSecret, grafanaBody)),
		now:    testNow,
		want:   Result{DeliveryID: bodyID(grafanaBody), Event: "firing"},
	}},
})
