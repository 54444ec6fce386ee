package verify

import "net/http"

func init() {
	register(&Provider{
		Name:             "dropbox",
		Title:            "Dropbox",
		Family:           FamilyHMAC,
		Signature:        "X-Dropbox-Signature: <hex HMAC-SHA256(body)> under the app secret",
		Doc:              "https://www.dropbox.com/developers/reference/webhooks",
		Notes:            "A notification only lists the accounts with changes (call list_folder/continue). Dropbox signs no time and sends no delivery id: the signature's digest (a fingerprint of the body) deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Dropbox-Signature"},
		Handshake:        "GET ?challenge=… → the challenge (text/plain, X-Content-Type-Options: nosniff)",
		HandshakeMethods: []string{http.MethodGet},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event: oneOf(fromFunc("the body's first member (list_folder)", func(c *call) string {
			if k := topLevelKeys(c.json()); len(k) > 0 {
				return k[0]
			}
			return ""
		})),
		Template:  "Dropbox {{event}}: changes for accounts {{payload.list_folder.accounts}}",
		Words:     []string{"secret"},
		Required:  []string{"secret"},
		SignsBody: true,
		build: withHandshake(bodyMAC(algSHA256, "X-Dropbox-Signature", "", encHex), handshakeSpec{
			detect: func(c *call) bool { return c.r.method() == http.MethodGet && c.r.query().Has("challenge") },
			auth:   hsNone,
			answer: func(c *call, _ scheme) (*Answer, error) {
				ch := cleanChallenge(c.r.query().Get("challenge"))
				if ch == "" {
					return nil, fail(ReasonBadChallenge, "")
				}
				return textAnswer("dropbox challenge", ch), nil
			},
		}),
	})
}
