package verify

import (
	"strconv"
	"time"
)

const mondayBody = `{"event":{"type":"create_pulse","triggerUuid":"8c3d5a1e2b4f","boardId":1234567,"pulseName":"New lead: Ann"}}`

var mondayJWT = hs256(genericSecret, `{"accountId":1,"userId":2,"aud":"https://hooks.example.com/hooks/p","exp":`+
	strconv.FormatInt(testNow.Add(5*time.Minute).Unix(), 10)+`,"iat":`+strconv.FormatInt(testNow.Unix(), 10)+`}`)

var _ = providerTest("monday", providerTests{
	vectors: []vector{{
		name:   "create_pulse",
		source: "computed from https://developer.monday.com/apps/docs/integration-authorization#authorization-header: a JWT signed HS256 with the signing secret",
		cfg:    Config{Scheme: "monday", Secrets: []string{genericSecret}},
		req:    post(mondayBody, "Authorization", mondayJWT),
		now:    testNow,
		stale:  testNow.Add(10 * time.Minute),
		want:   Result{DeliveryID: "8c3d5a1e2b4f", Event: "create_pulse"},
	}},
	handshakes: []handshakeCase{{
		name:   "challenge",
		source: "computed from https://developer.monday.com/api-reference/reference/webhooks#url-verification: answer the posted challenge as JSON",
		req:    post(`{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`),
		status: 200, ctype: "application/json", body: `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`,
	}},
	notes: "the JWT does not cover the body",
})
