package verify

const telegramBody = `{"update_id":10000,"message":{"message_id":1365,"date":1441645532,"chat":{"id":1111111,"type":"private"},"from":{"id":1111111,"username":"Test"},"text":"/start"}}`

var _ = providerTest("telegram", providerTests{
	vectors: []vector{{
		name:   "event",
		source: "computed from https://core.telegram.org/bots/api#setwebhook: the token is sent as is",
		cfg:    Config{Scheme: "telegram", Secrets: []string{genericSecret}},
		req:    post(telegramBody, "X-Telegram-Bot-Api-Secret-Token", genericSecret),
		now:    testNow,
		want:   Result{DeliveryID: "10000", Event: "message"},
	}},
	notes: "a token does not cover the body",
})
