package verify

import "encoding/hex"

func init() {
	register(&Provider{
		Name:             "zoom",
		Title:            "Zoom",
		Family:           FamilyHMAC,
		Signature:        "x-zm-signature: v0=<hex HMAC-SHA256(v0:timestamp:body)>, x-zm-request-timestamp",
		Doc:              "https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events",
		Notes:            "The secret is the app's Secret Token (the deprecated verification token is not supported). During a rotation the first secret answers url_validation. Zoom sends no delivery id: the body's digest deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Zm-Signature"},
		Handshake:        "endpoint.url_validation (signed) → {\"plainToken\",\"encryptedToken\": hex HMAC-SHA256(plainToken)}",
		DeliveryID:       oneOf(fromBodyHash()),
		Event:            oneOf(fromJSON("event")),
		Template:         "Zoom {{event}}: {{payload.payload.object.topic}} ({{payload.payload.object.id}})",
		Tolerance:        DefaultTolerance,
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		build: withHandshake(macProvider(macSpec{
			headers: []string{"X-Zm-Signature"}, prefix: "v0=", enc: encHex,
			parts:  []part{lit("v0:"), tsPart(), lit(":"), bodyPart()},
			tsFrom: tsHeader, tsHeader: "X-Zm-Request-Timestamp",
		}), handshakeSpec{
			detect: jsonIs("endpoint.url_validation", "event"),
			auth:   hsSigned,
			answer: func(c *call, s scheme) (*Answer, error) {
				plain := jsonField(c.json(), "payload", "plainToken")
				if !isPlainToken(plain, MaxChallengeLen) {
					return nil, fail(ReasonBadChallenge, "")
				}
				sum := macOf(s).m.sum(0, nil, []byte(plain))
				return jsonAnswer("zoom url_validation", "plainToken", plain, "encryptedToken", hex.EncodeToString(sum)), nil
			},
		}),
	})
}
