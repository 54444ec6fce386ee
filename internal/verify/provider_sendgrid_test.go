package verify

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"time"
)

var sendgridKey = fixedP256(424242)

const sendgridEvents = `[{"email":"ann@example.com","event":"bounce","reason":"550 5.1.1 unknown user","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA"}]`

// sendgridSig signs timestamp+body with key (ASN.1 DER, base64).
func sendgridSig(key *ecdsa.PrivateKey, timestamp, body string) string {
	digest := sha256.Sum256([]byte(timestamp + body))
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(sig)
}

var _ = providerTest("sendgrid", providerTests{
	vectors: []vector{{
		name:   "SendGrid's library example",
		source: "vector from https://github.com/sendgrid/sendgrid-go/blob/main/helpers/eventwebhook/eventwebhook_test.go",
		cfg:    Config{Scheme: "sendgrid", PublicKeys: []string{"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="}},
		req: post(`{"category":"example_payload","event":"test_event","message_id":"message_id"}`,
			"X-Twilio-Email-Event-Webhook-Timestamp", "1588788367",
			"X-Twilio-Email-Event-Webhook-Signature", "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="),
		now:  time.Unix(1588788367, 0),
		want: Result{DeliveryID: bodyID(`{"category":"example_payload","event":"test_event","message_id":"message_id"}`), Event: "test_event"},
	}, {
		name:   "bounce batch",
		source: "computed from https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features: ECDSA P-256 over SHA-256 of timestamp + body under a fixed key",
		cfg:    Config{Scheme: "sendgrid", PublicKeys: []string{pkixB64(sendgridKey.Public())}},
		req: post(sendgridEvents, "X-Twilio-Email-Event-Webhook-Timestamp", ts(0),
			"X-Twilio-Email-Event-Webhook-Signature", sendgridSig(sendgridKey, ts(0), sendgridEvents)),
		now:  testNow,
		want: Result{DeliveryID: bodyID(sendgridEvents), Event: "bounce", Payload: []byte(`{"events":` + sendgridEvents + `}`)},
	}},
})
