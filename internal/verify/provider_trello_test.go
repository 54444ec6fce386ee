package verify

const trelloBody = `{"model":{"id":"4d5ea62fd76aa1136000000c","name":"Roadmap"},"action":{"id":"51f9424bcd6e040f3c002412","type":"createCard","memberCreator":{"fullName":"Ann Lee"}}}`

var _ = providerTest("trello", providerTests{
	vectors: []vector{{
		name:   "createCard",
		source: "computed from https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks/#webhook-signatures: base64 HMAC-SHA1 of the body followed by the callback URL",
		cfg:    Config{Scheme: "trello", Secrets: []string{genericSecret}},
		req:    post(trelloBody, "X-Trello-Webhook", b64MAC(sha1H, genericSecret, trelloBody, hookURL)),
		now:    testNow,
		want:   Result{DeliveryID: "51f9424bcd6e040f3c002412", Event: "createCard"},
	}},
	handshakes: []handshakeCase{{
		name:   "HEAD on creation",
		source: "computed from https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks/#creating-a-webhook: Trello sends a HEAD request and wants 200",
		req:    req("HEAD", hookURL, ""),
		status: 200,
	}, {
		name:  "GET is not a handshake",
		req:   req("GET", hookURL, ""),
		notHS: true,
	}},
})
