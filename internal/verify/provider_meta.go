package verify

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
)

func init() {
	register(&Provider{
		Name:             "meta",
		Title:            "Meta (WhatsApp Cloud API, Instagram, Messenger)",
		Family:           FamilyHMAC,
		Signature:        "X-Hub-Signature-256: sha256=<hex HMAC-SHA256(body)> under the app secret",
		Doc:              "https://developers.facebook.com/docs/graph-api/webhooks/getting-started#verification-requests",
		Notes:            "The secret is the app secret; verify_token is the Verify Token typed in the app's webhook settings. Meta signs no time and sends no delivery id: the signature's digest (a fingerprint of the body) deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Hub-Signature-256", "X-Hub-Signature"},
		Handshake:        "GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=… → the challenge (text), only with the right verify_token",
		HandshakeMethods: []string{http.MethodGet},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event: oneOf(fromFunc("body object.entry[0].changes[0].field", func(c *call) string {
			doc := c.json()
			field := jsonField(doc, "entry", "0", "changes", "0", "field")
			if field == "" && jsonValue(doc, "entry", "0", "messaging") != nil {
				field = "messaging"
			}
			return joinEvent(jsonField(doc, "object"), field)
		})),
		Template:  "Meta {{event}} from {{payload.entry.0.changes.0.value.messages.0.from}}{{payload.entry.0.messaging.0.sender.id}}: {{payload.entry.0.changes.0.value.messages.0.text.body}}{{payload.entry.0.messaging.0.message.text}}",
		Words:     []string{"secret", "verify_token"},
		Required:  []string{"secret", "verify_token"},
		SignsBody: true,
		build: func(b *builder) (scheme, error) {
			s, err := b.macScheme(macSpec{headers: []string{"X-Hub-Signature-256"}, prefix: "sha256=", enc: encHex, parts: []part{bodyPart()}})
			if err != nil {
				return nil, err
			}
			tok, err := b.verifyToken()
			if err != nil {
				return nil, err
			}
			return &hsScheme{scheme: s, hs: handshakeSpec{
				detect: func(c *call) bool { return c.r.method() == http.MethodGet && c.r.query().Has("hub.mode") },
				auth:   hsAnswer,
				answer: func(c *call, _ scheme) (*Answer, error) {
					q := c.r.query()
					ch := cleanChallenge(q.Get("hub.challenge"))
					if q.Get("hub.mode") != "subscribe" || ch == "" || !tok.matches(q.Get("hub.verify_token")) {
						return nil, fail(ReasonBadHandshake, "")
					}
					return textAnswer("meta subscribe handshake", ch), nil
				},
			}}, nil
		},
	})
}

// secretSum is a configured token kept as its SHA-256, compared in
// constant time.
type secretSum [sha256.Size]byte

// matches reports whether s is the token.
func (t secretSum) matches(s string) bool {
	sum := sha256.Sum256([]byte(s))
	return subtle.ConstantTimeCompare(sum[:], t[:]) == 1
}

// verifyToken checks and keeps the verify_token word.
func (b *builder) verifyToken() (secretSum, error) {
	return b.secretWord("verify_token", b.cfg.VerifyToken, 8)
}

// secretWord checks a single-valued secret word: set, expanded, at least
// minLen bytes.
func (b *builder) secretWord(name, v string, minLen int) (secretSum, error) {
	switch {
	case v == "":
		return secretSum{}, fmt.Errorf("%s: required by verify %s", name, b.p.Name)
	case IsSecretPlaceholder(v):
		return secretSum{}, fmt.Errorf("%s: placeholder was not expanded", name)
	case v == redacted:
		return secretSum{}, fmt.Errorf("%s: is the redaction marker %s; use a placeholder such as {env.NAME}", name, redacted)
	case len(v) < minLen:
		return secretSum{}, fmt.Errorf("%s: shorter than %d bytes", name, minLen)
	}
	return sha256.Sum256([]byte(v)), nil
}
