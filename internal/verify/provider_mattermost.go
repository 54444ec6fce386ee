package verify

func init() {
	register(&Provider{
		Name:       "mattermost",
		Title:      "Mattermost (outgoing webhook)",
		Family:     FamilyToken,
		Signature:  "token=<the webhook's token> in the (form or JSON) body",
		Doc:        "https://developers.mattermost.com/integrate/webhooks/outgoing/",
		Notes:      "Mattermost sends the webhook's token in the body: it authenticates the sender, not the body, and is removed from the payload the agent sees.",
		Body:       BodyJSONOrForm,
		DropFields: []string{"token"},
		DeliveryID: oneOf(fromJSON("post_id")),
		Event:      oneOf(fromJSON("trigger_word")),
		Template:   "Mattermost {{event}} from {{payload.user_name}} in {{payload.channel_name}}: {{payload.text}}",
		Words:      []string{"secret"},
		Required:   []string{"secret"},
		build:      tokenProvider(tokenSpec{field: []string{"token"}}),
	})
}
