package verify

const circleciBody = `{"type":"workflow-completed","id":"3888f21b-eaa7-38e3-8f3d-75a63bba8895","happened_at":"2021-09-01T22:49:34.317Z","project":{"name":"webhook-service"},"workflow":{"name":"build","status":"success"}}`

var _ = providerTest("circleci", providerTests{
	vectors: []vector{{
		name:   "workflow-completed",
		source: "computed from https://circleci.com/docs/guides/integration/outbound-webhooks/#validate-webhooks: v1=<hex HMAC-SHA256(body)>",
		cfg:    Config{Scheme: "circleci", Secrets: []string{genericSecret}},
		req:    post(circleciBody, "circleci-signature", "v1="+hexMAC(sha256H, genericSecret, circleciBody)),
		now:    testNow,
		want:   Result{DeliveryID: "3888f21b-eaa7-38e3-8f3d-75a63bba8895", Event: "workflow-completed"},
	}},
})
