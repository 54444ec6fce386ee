package verify

import "net/http"

func init() {
	register(&Provider{
		Name:             "asana",
		Title:            "Asana",
		Family:           FamilyHMAC,
		Signature:        "X-Hook-Signature: <hex HMAC-SHA256(body)> under the X-Hook-Secret of the handshake",
		Doc:              "https://developers.asana.com/docs/webhooks-guide#the-webhook-handshake",
		Notes:            "Asana hands the key over in the handshake's X-Hook-Secret. With secret_file the edge keeps it there (written once, 0600; the first handshake wins, so create the webhook right after the reload); with secret only that secret is echoed. Asana signs no time and sends no delivery id: the signature's digest (a fingerprint of the body) deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Hook-Signature", "X-Hook-Secret"},
		Handshake:        "POST with X-Hook-Secret → 200 echoing X-Hook-Secret, the secret kept in secret_file (first one wins) or compared with secret",
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event: oneOf(fromFunc("body events[0].resource.resource_type.action", func(c *call) string {
			return joinEvent(jsonField(c.json(), "events", "0", "resource", "resource_type"), jsonField(c.json(), "events", "0", "action"))
		})),
		Template:  "Asana {{event}}: {{payload.events.0.resource.gid}} by user {{payload.events.0.user.gid}}",
		Words:     []string{"secret", "secret_file"},
		SignsBody: true,
		build: withHandshake(capturedProvider(macSpec{
			headers: []string{"X-Hook-Signature"}, enc: encHex, parts: []part{bodyPart()},
		}), handshakeSpec{
			detect: func(c *call) bool { return isPost(c) && len(c.header().Values("X-Hook-Secret")) > 0 },
			auth:   hsAnswer,
			answer: func(c *call, s scheme) (*Answer, error) {
				sec, err := headerValue(c.header(), "X-Hook-Secret")
				if err != nil || !capturedOf(s).capture(sec) {
					return nil, fail(ReasonBadHandshake, "X-Hook-Secret")
				}
				a := emptyAnswer("asana handshake", http.StatusOK)
				a.Header.Set("X-Hook-Secret", sec)
				return a, nil
			},
		}),
	})
}
