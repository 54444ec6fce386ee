package verify

import (
	"crypto/subtle"
	"net/http"
)

func init() {
	register(&Provider{
		Name:      "twilio",
		Title:     "Twilio",
		Family:    FamilyHMAC,
		Signature: "X-Twilio-Signature: <base64 HMAC-SHA1(URL + sorted form fields)>; JSON bodies: URL with bodySHA256",
		Doc:       "https://www.twilio.com/docs/usage/webhooks/webhooks-security",
		Notes: "The key is the account's Auth Token. Form posts (SMS, voice) sign the URL and the sorted fields; JSON posts sign the URL only, " +
			"whose bodySHA256 parameter must be the body's hex SHA-256. The URL is the one configured in Twilio (set public_url behind a proxy that is not trusted). " +
			"Webhook rules with a shared key (X-Twilio-Webhooks-Signature-Settings) are not supported. The edge answers an accepted request with empty TwiML. Twilio signs no time.",
		Body:             BodyJSONOrForm,
		SignatureHeaders: []string{"X-Twilio-Signature"},
		DeliveryID:       oneOf(fromHeader("I-Twilio-Idempotency-Token"), fromJSON("MessageSid"), fromJSON("SmsSid"), fromJSON("CallSid")),
		Event: oneOf(fromFunc("message or call, with its status", func(c *call) string {
			doc := c.json()
			switch {
			case jsonField(doc, "CallSid") != "":
				return joinEvent("call", jsonField(doc, "CallStatus"))
			case jsonField(doc, "MessageSid") != "" || jsonField(doc, "SmsSid") != "":
				st := jsonField(doc, "SmsStatus")
				if st == "" {
					st = jsonField(doc, "MessageStatus")
				}
				return joinEvent("message", st)
			}
			return ""
		})),
		Template:  "Twilio {{event}} from {{payload.From}} to {{payload.To}}: {{payload.Body}}",
		Words:     []string{"secret", "public_url"},
		Required:  []string{"secret"},
		SignsBody: true,
		Ack: &Answer{Status: http.StatusOK, What: "empty TwiML", Header: http.Header{"Content-Type": {"text/xml"}},
			Body: []byte(`<?xml version="1.0" encoding="UTF-8"?><Response></Response>`)},
		build: macProvider(macSpec{
			alg: algSHA1, headers: []string{"X-Twilio-Signature"}, enc: encBase64,
			parts: []part{urlPart(nil), formPart()},
			check: twilioBodyHash,
		}),
	})
}

// twilioBodyHash checks, for a body that is not a form, the signed URL's
// bodySHA256 parameter against the body.
func twilioBodyHash(c *call) error {
	if c.r.isForm() {
		return nil
	}
	want := c.r.query().Get("bodySHA256")
	if want == "" {
		return fail(ReasonMalformedBody, "")
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(c.bodySHA256())) != 1 {
		return fail(ReasonBadSignature, "X-Twilio-Signature")
	}
	return nil
}
