package verify

func init() {
	register(&Provider{
		Name:             "circleci",
		Title:            "CircleCI",
		Family:           FamilyHMAC,
		Signature:        "circleci-signature: v1=<hex HMAC-SHA256(body)>",
		Doc:              "https://circleci.com/docs/guides/integration/outbound-webhooks/#validate-webhooks",
		Notes:            "Outbound webhooks; CircleCI signs no time (happened_at is in the body).",
		SignatureHeaders: []string{"Circleci-Signature"},
		DeliveryID:       oneOf(fromJSON("id")),
		Event:            oneOf(fromJSON("type")),
		Template:         "CircleCI {{event}}: {{payload.project.name}} {{payload.workflow.name}} {{payload.workflow.status}}{{payload.job.status}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: macProvider(macSpec{
			headers: []string{"Circleci-Signature"}, enc: encHex,
			list:  &listSpec{sep: ",", sigKey: "v1"},
			parts: []part{bodyPart()},
		}),
	})
}
