package verify

const muxBody = `{"type":"video.asset.ready","id":"3a56ac3d-33da-4366-855b-f592d898409d","object":{"type":"asset","id":"0201p02fGKPE7MrbC269XRD7LpcHhrmbu0002"},"data":{"id":"0201p02fGKPE7MrbC269XRD7LpcHhrmbu0002","status":"ready"}}`

var _ = providerTest("mux", providerTests{
	vectors: []vector{{
		name:   "video.asset.ready",
		source: "computed from https://www.mux.com/docs/core/verify-webhook-signatures: t=<unix>,v1=<hex HMAC-SHA256(t.body)>",
		cfg:    Config{Scheme: "mux", Secrets: []string{genericSecret}},
		req:    post(muxBody, "Mux-Signature", "t="+ts(0)+",v1="+hexMAC(sha256H, genericSecret, ts(0), ".", muxBody)),
		now:    testNow,
		want:   Result{DeliveryID: "3a56ac3d-33da-4366-855b-f592d898409d", Event: "video.asset.ready"},
	}},
})
