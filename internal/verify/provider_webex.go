package verify

func init() {
	register(&Provider{
		Name:             "webex",
		Title:            "Webex",
		Family:           FamilyHMAC,
		Signature:        "X-Spark-Signature: <hex HMAC-SHA1(body)>",
		Doc:              "https://developer.webex.com/docs/webhooks#handling-requests-from-webex",
		Notes:            "Webex signs no time.",
		SignatureHeaders: []string{"X-Spark-Signature"},
		DeliveryID:       oneOf(fromJSON("id")),
		Event:            oneOf(fromFunc("body resource.event", func(c *call) string { return joinEvent(jsonField(c.json(), "resource"), jsonField(c.json(), "event")) })),
		Template:         "Webex {{event}}: {{payload.data.personEmail}} in {{payload.data.roomId}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build:            bodyMAC(algSHA1, "X-Spark-Signature", "", encHex),
	})
}
