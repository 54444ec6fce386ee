package verify

import (
	"net/url"
	"strings"
)

const mailgunToken = "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"

var (
	mailgunJSON = `{"signature":{"timestamp":"` + ts(0) + `","token":"` + mailgunToken + `","signature":"` +
		hexMAC(sha256H, genericSecret, ts(0), mailgunToken) + `"},"event-data":{"event":"delivered","id":"CPgfbmQMTCKtHW6uIWtuVe","recipient":"alice@example.com","message":{"headers":{"subject":"Your order"}}}}`
	mailgunForm = url.Values{"timestamp": {ts(0)}, "token": {"f2c5d9e1a0b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2"}, "event": {"opened"},
		"recipient": {"bob@example.com"}, "subject": {"Hello"},
		"signature": {hexMAC(sha256H, genericSecret, ts(0), "f2c5d9e1a0b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2")}}.Encode()
)

var _ = providerTest("mailgun", providerTests{
	vectors: []vector{{
		name:   "JSON webhook",
		source: "computed from https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks: hex HMAC-SHA256 of timestamp + token under the signing key",
		cfg:    Config{Scheme: "mailgun", Secrets: []string{genericSecret}},
		req:    post(mailgunJSON, "Content-Type", "application/json"),
		now:    testNow,
		want:   Result{DeliveryID: "CPgfbmQMTCKtHW6uIWtuVe", Event: "delivered"},
	}, {
		name:   "legacy form webhook",
		source: "computed from https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks: the same fields as form fields",
		cfg:    Config{Scheme: "mailgun", Secrets: []string{genericSecret}},
		req:    post(mailgunForm, "Content-Type", formCT),
		now:    testNow,
		want:   Result{DeliveryID: "f2c5d9e1a0b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2", Event: "opened"},
	}},
	tamper: func(r *Request) {
		r.Body = []byte(strings.Replace(string(r.Body), mailgunToken, "b"+mailgunToken[1:], 1))
	},
	strip: func(r *Request) {
		r.Body = []byte(strings.Replace(string(r.Body), `"signature":"`, `"unsigned":"`, 1))
	},
})
