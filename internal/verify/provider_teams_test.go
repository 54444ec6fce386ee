package verify

import (
	"encoding/base64"
	"testing"
)

const teamsBody = `{"type":"message","id":"1485983408511","text":"<at>Agent</at> summarise the thread","from":{"name":"Ann Lee"}}`

var teamsKey = []byte("teams-outgoing-webhook-key-32by")

var _ = providerTest("teams", providerTests{
	vectors: []vector{{
		name:   "message",
		source: "computed from https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-outgoing-webhook: Authorization: HMAC base64 HMAC-SHA256 of the body under the decoded security token",
		cfg:    Config{Scheme: "teams", Secrets: []string{base64.StdEncoding.EncodeToString(teamsKey)}},
		req:    post(teamsBody, "Authorization", "HMAC "+b64MAC(sha256H, string(teamsKey), teamsBody)),
		now:    testNow,
		want:   Result{DeliveryID: "1485983408511", Event: "message"},
	}},
	wrong: func(_ *testing.T, cfg Config) Config {
		cfg.Secrets = []string{base64.StdEncoding.EncodeToString([]byte(otherSecret))}
		return cfg
	},
})
