package verify

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
)

// maxCRCToken bounds X's crc_token (about 48 characters in practice).
const maxCRCToken = 256

func init() {
	register(&Provider{
		Name:             "x",
		Title:            "X (Twitter) Account Activity",
		Family:           FamilyHMAC,
		Signature:        "x-twitter-webhooks-signature: sha256=<base64 HMAC-SHA256(body)> under the consumer secret",
		Doc:              "https://docs.x.com/x-api/webhooks/introduction",
		Notes:            "The secret is the app's consumer (API key) secret. The CRC answer is an HMAC under the same key, so crc_token must be a plain token (letters, digits, -_=+/) and a verified body must be a JSON object: a CRC answer can never be replayed as a signature. X signs no time and sends no delivery id: the signature's digest (a fingerprint of the body) deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Twitter-Webhooks-Signature"},
		Handshake:        "GET ?crc_token=… → {\"response_token\":\"sha256=<base64 HMAC-SHA256(crc_token)>\"}",
		HandshakeMethods: []string{http.MethodGet},
		DeliveryID:       oneOf(fromSignatureDigest()),
		Event: oneOf(fromFunc("body's *_events member", func(c *call) string {
			return firstKeyWithSuffix(c.json(), "_events")
		})),
		Template:  "X {{event}} for user {{payload.for_user_id}}: {{payload.tweet_create_events.0.text}}{{payload.direct_message_events.0.message_create.message_data.text}}",
		Words:     []string{"secret"},
		Required:  []string{"secret"},
		SignsBody: true,
		build: withHandshake(macProvider(macSpec{
			headers: []string{"X-Twitter-Webhooks-Signature"}, prefix: "sha256=", enc: encBase64,
			parts: []part{bodyPart()},
			check: requireObject,
		}), handshakeSpec{
			detect: func(c *call) bool { return c.r.method() == http.MethodGet && c.r.query().Has("crc_token") },
			auth:   hsAnswer,
			answer: func(c *call, s scheme) (*Answer, error) {
				tok := c.r.query().Get("crc_token")
				if !isPlainToken(tok, maxCRCToken) {
					return nil, fail(ReasonBadHandshake, "")
				}
				m := macOf(s).m
				sum := m.sum(0, nil, []byte(tok))
				return jsonAnswer("x crc", "response_token", "sha256="+base64.StdEncoding.EncodeToString(sum)), nil
			},
		}),
	})
}

// requireObject refuses a body that is not a JSON object (checked before
// the MAC).
func requireObject(c *call) error {
	if t := bytes.TrimLeft(c.body(), " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return fail(ReasonMalformedBody, "")
	}
	return nil
}

// isPlainToken reports whether s is 1 to max bytes of letters, digits and
// -_=+/.
func isPlainToken(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_=+/", c) >= 0) {
			return false
		}
	}
	return true
}

// firstKeyWithSuffix returns the first top-level member name of doc that
// ends with suffix.
func firstKeyWithSuffix(doc []byte, suffix string) string {
	for _, k := range topLevelKeys(doc) {
		if strings.HasSuffix(k, suffix) {
			return k
		}
	}
	return ""
}
