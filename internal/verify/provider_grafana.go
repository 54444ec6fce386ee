package verify

func init() {
	register(&Provider{
		Name:             "grafana",
		Title:            "Grafana Alerting",
		Family:           FamilyHMAC,
		Signature:        "X-Grafana-Alerting-Signature: <hex HMAC-SHA256(body)>, or of timestamp:body with a timestamp header",
		Doc:              "https://grafana.com/docs/grafana/latest/alerting/configure-notifications/manage-contact-points/integrations/webhook-notifier/",
		Notes:            "The webhook contact point's HMAC signature (Grafana 12+). Set timestamp_header to the contact point's Timestamp Header (it has no default) to sign and check the time; header overrides the signature header. Grafana sends no delivery id: the body's digest deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Grafana-Alerting-Signature"},
		DeliveryID:       oneOf(fromBodyHash()),
		Event:            oneOf(fromJSON("status")),
		Template:         "Grafana {{event}}: {{payload.title}} {{payload.message}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret", "header", "timestamp_header"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: func(b *builder) (scheme, error) {
			spec := macSpec{headers: []string{"X-Grafana-Alerting-Signature"}, enc: encHex, parts: []part{bodyPart()}}
			if b.cfg.Header != "" {
				h, err := headerName("header", b.cfg.Header)
				if err != nil {
					return nil, err
				}
				spec.headers = []string{h}
			}
			if b.cfg.TimestampHeader != "" {
				h, err := headerName("timestamp_header", b.cfg.TimestampHeader)
				if err != nil {
					return nil, err
				}
				spec.tsFrom, spec.tsHeader = tsHeader, h
				spec.parts = []part{tsPart(), lit(":"), bodyPart()}
			} else if b.cfg.Tolerance != 0 {
				return nil, errTolNeedsTimestamp
			}
			return b.macScheme(spec)
		},
	})
}
