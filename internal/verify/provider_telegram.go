package verify

func init() {
	register(&Provider{
		Name:             "telegram",
		Title:            "Telegram Bot API",
		Family:           FamilyToken,
		Signature:        "X-Telegram-Bot-Api-Secret-Token: <the secret_token of setWebhook>",
		Doc:              "https://core.telegram.org/bots/api#setwebhook",
		Notes:            "The secret_token given to setWebhook (1-256 of A-Z a-z 0-9 _ -) is sent as is: it authenticates the sender, not the body. update_id deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Telegram-Bot-Api-Secret-Token"},
		DeliveryID:       oneOf(fromJSON("update_id")),
		Event: oneOf(fromFunc("the update's kind (message, callback_query, …)", func(c *call) string {
			for _, k := range topLevelKeys(c.json()) {
				if k != "update_id" {
					return k
				}
			}
			return ""
		})),
		Template: "Telegram {{event}} from {{payload.message.from.username}}{{payload.callback_query.from.username}}: {{payload.message.text}}{{payload.callback_query.data}}",
		Words:    []string{"secret"},
		Required: []string{"secret"},
		build:    tokenProvider(tokenSpec{header: "X-Telegram-Bot-Api-Secret-Token"}),
	})
}
