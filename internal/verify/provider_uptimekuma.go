package verify

func init() {
	register(&Provider{
		Name:             "uptimekuma",
		Title:            "Uptime Kuma",
		Family:           FamilyToken,
		Signature:        "Authorization: Bearer <token> (its webhook's additional headers; or header)",
		Doc:              "https://github.com/louislam/uptime-kuma/wiki/Notification-Methods",
		Notes:            "Uptime Kuma's webhook notification can add headers (Additional Headers, JSON): set Authorization: Bearer <token>. Other uptime monitors that send a static header work the same way (or use verify token).",
		SignatureHeaders: []string{"Authorization"},
		DeliveryID:       oneOf(fromBodyHash()),
		Event: oneOf(fromFunc("heartbeat.status as up or down", func(c *call) string {
			switch jsonField(c.json(), "heartbeat", "status") {
			case "0":
				return "down"
			case "1":
				return "up"
			}
			return ""
		})),
		Template: "Uptime Kuma {{event}}: {{payload.monitor.name}} {{payload.msg}}",
		Words:    []string{"secret", "header"},
		Required: []string{"secret"},
		build:    tokenProvider(tokenSpec{header: "Authorization"}),
	})
}
