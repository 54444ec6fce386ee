package verify

const buildkiteBody = `{"event":"build.finished","build":{"number":42,"state":"passed"},"pipeline":{"name":"deploy"}}`

var _ = providerTest("buildkite", providerTests{
	vectors: []vector{{
		name:   "build.finished",
		source: "computed from https://buildkite.com/docs/apis/webhooks#webhook-signature: timestamp=<unix>,signature=<hex HMAC-SHA256(timestamp.body)>",
		cfg:    Config{Scheme: "buildkite", Secrets: []string{genericSecret}},
		req: post(buildkiteBody, "X-Buildkite-Event", "build.finished",
			"X-Buildkite-Signature", "timestamp="+ts(0)+",signature="+hexMAC(sha256H, genericSecret, ts(0), ".", buildkiteBody)),
		now:  testNow,
		want: Result{DeliveryID: bodyID(buildkiteBody), Event: "build.finished"},
	}},
})
