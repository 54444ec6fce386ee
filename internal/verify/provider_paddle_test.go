package verify

const paddleBody = `{"event_id":"evt_01h8","event_type":"transaction.completed","notification_id":"ntf_01h8","data":{"id":"txn_01h8","status":"completed"}}`

var _ = providerTest("paddle", providerTests{
	vectors: []vector{{
		name:   "transaction.completed",
		source: "computed from https://developer.paddle.com/webhooks/signature-verification: ts=<unix>;h1=<hex HMAC-SHA256(ts:body)>",
		cfg:    Config{Scheme: "paddle", Secrets: []string{"pdl_ntfset_01h8_secretkey"}},
		req:    post(paddleBody, "Paddle-Signature", "ts="+ts(0)+";h1="+hexMAC(sha256H, "pdl_ntfset_01h8_secretkey", ts(0), ":", paddleBody)),
		now:    testNow,
		want:   Result{DeliveryID: "ntf_01h8", Event: "transaction.completed"},
	}},
})
