package verify

import (
	"crypto/ed25519"
	"encoding/base64"
)

var telnyxKey = ed25519.NewKeyFromSeed([]byte("telnyx-test-seed-0123456789abcde"))

const telnyxBody = `{"data":{"event_type":"message.received","id":"b301ed3f-1490-491f-995f-6e64e69674d4","payload":{"from":{"phone_number":"+13125550001"},"text":"Hello agent"}}}`

var _ = providerTest("telnyx", providerTests{
	vectors: []vector{{
		name:   "message.received",
		source: "computed from https://developers.telnyx.com/docs/messaging/messages/receiving-webhooks#webhook-signing: base64 Ed25519 signature of timestamp|body under a fixed key",
		cfg:    Config{Scheme: "telnyx", PublicKeys: []string{base64.StdEncoding.EncodeToString(telnyxKey.Public().(ed25519.PublicKey))}},
		req: post(telnyxBody, "telnyx-timestamp", ts(0),
			"telnyx-signature-ed25519", base64.StdEncoding.EncodeToString(ed25519.Sign(telnyxKey, []byte(ts(0)+"|"+telnyxBody)))),
		now:  testNow,
		want: Result{DeliveryID: "b301ed3f-1490-491f-995f-6e64e69674d4", Event: "message.received"},
	}},
})
