package verify

import (
	"encoding/base64"
	"testing"
)

const airtableBody = `{"base":{"id":"appQNnixQQ5kLHn9l"},"webhook":{"id":"achW8L8S2QGNq4JPl"},"timestamp":"2022-02-01T21:25:05.663Z"}`

var airtableKey = []byte("airtable-mac-secret-32-bytes-key")

var _ = providerTest("airtable", providerTests{
	vectors: []vector{{
		name:   "notification",
		source: "computed from https://airtable.com/developers/web/api/webhooks-overview#webhook-notification-delivery: hmac-sha256= hex HMAC-SHA256 of the body under the decoded macSecretBase64",
		cfg:    Config{Scheme: "airtable", Secrets: []string{base64.StdEncoding.EncodeToString(airtableKey)}},
		req:    post(airtableBody, "X-Airtable-Content-MAC", "hmac-sha256="+hexMAC(sha256H, string(airtableKey), airtableBody)),
		now:    testNow,
		want:   Result{DeliveryID: sha256Hex("hmac-sha256=" + hexMAC(sha256H, string(airtableKey), airtableBody)), Event: "notification"},
	}},
	wrong: func(_ *testing.T, cfg Config) Config {
		cfg.Secrets = []string{base64.StdEncoding.EncodeToString([]byte(otherSecret))}
		return cfg
	},
})
