package verify

import "time"

const boxBody = `{"type":"webhook_event","id":"eb0c4e06-751f-442c-86f8-fd5bb404dbec","trigger":"FILE.UPLOADED","source":{"type":"file","name":"report.pdf"},"created_by":{"name":"Ann"}}`

var boxTS = testNow.Format(time.RFC3339)

var _ = providerTest("box", providerTests{
	vectors: []vector{{
		name:   "FILE.UPLOADED signed by both keys",
		source: "computed from https://developer.box.com/guides/webhooks/v2/signatures-v2/: base64 HMAC-SHA256 of the body followed by BOX-DELIVERY-TIMESTAMP, primary and secondary key",
		cfg:    Config{Scheme: "box", Secrets: []string{"SamplePrimaryKey0000", "SampleSecondaryKey00"}},
		req: post(boxBody, "BOX-DELIVERY-ID", "f96bb54b-ee16-4fc5-aa65-8c2d9e5b546f", "BOX-DELIVERY-TIMESTAMP", boxTS,
			"BOX-SIGNATURE-PRIMARY", b64MAC(sha256H, "SamplePrimaryKey0000", boxBody, boxTS),
			"BOX-SIGNATURE-SECONDARY", b64MAC(sha256H, "SampleSecondaryKey00", boxBody, boxTS)),
		now:  testNow,
		want: Result{DeliveryID: "f96bb54b-ee16-4fc5-aa65-8c2d9e5b546f", Event: "FILE.UPLOADED"},
	}},
})
