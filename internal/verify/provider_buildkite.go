package verify

func init() {
	register(&Provider{
		Name:             "buildkite",
		Title:            "Buildkite",
		Family:           FamilyHMAC,
		Signature:        "X-Buildkite-Signature: timestamp=<unix>,signature=<hex HMAC-SHA256(timestamp.body)>",
		Doc:              "https://buildkite.com/docs/apis/webhooks#webhook-signature",
		Notes:            "The signature mode of Buildkite webhooks (its token mode sends the token as is: use verify token with header X-Buildkite-Token). It sends no delivery id: the body's digest deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Buildkite-Signature"},
		DeliveryID:       oneOf(fromBodyHash()),
		Event:            oneOf(fromHeader("X-Buildkite-Event"), fromJSON("event")),
		Template:         "Buildkite {{event}}: {{payload.pipeline.name}} #{{payload.build.number}} {{payload.build.state}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"X-Buildkite-Signature"}, enc: encHex,
			list:   &listSpec{sep: ",", tsKey: "timestamp", sigKey: "signature"},
			parts:  []part{tsPart(), lit("."), bodyPart()},
			tsFrom: tsList,
		}),
	})
}
