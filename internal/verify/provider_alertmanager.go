package verify

func init() {
	register(&Provider{
		Name:             "alertmanager",
		Title:            "Prometheus Alertmanager",
		Family:           FamilyToken,
		Signature:        "Authorization: Bearer <token> or Basic (http_config)",
		Doc:              "https://prometheus.io/docs/alerting/latest/configuration/#webhook_config",
		Notes:            "Alertmanager's webhook_config sends http_config's authorization (Bearer) or basic_auth credentials. It sends no delivery id: the body's digest deduplicates redeliveries of one notification.",
		SignatureHeaders: []string{"Authorization"},
		DeliveryID:       oneOf(fromBodyHash()),
		Event:            oneOf(fromJSON("status")),
		Template:         "Alertmanager {{event}}: {{payload.commonLabels.alertname}} {{payload.commonAnnotations.summary}}",
		Words:            []string{"secret", "header"},
		Required:         []string{"secret"},
		build:            tokenProvider(tokenSpec{header: "Authorization"}),
	})
}
