package verify

import "strconv"

var linearBody = `{"action":"create","type":"Issue","data":{"identifier":"ENG-1","title":"Fix login"},"url":"https://linear.app/acme/issue/ENG-1","webhookTimestamp":` + strconv.FormatInt(testNow.UnixMilli(), 10) + `}`

var _ = providerTest("linear", providerTests{
	vectors: []vector{{
		name:   "Issue create",
		source: "computed from https://linear.app/developers/webhooks#securing-webhooks: hex HMAC-SHA256 of the body, webhookTimestamp within a minute",
		cfg:    Config{Scheme: "linear", Secrets: []string{genericSecret}},
		req: post(linearBody, "Linear-Signature", hexMAC(sha256H, genericSecret, linearBody),
			"Linear-Delivery", "234d1a4e-b617-4388-90fe-adc3633d6b72", "Linear-Event", "Issue"),
		now:  testNow,
		want: Result{DeliveryID: "234d1a4e-b617-4388-90fe-adc3633d6b72", Event: "Issue.create"},
	}},
})
