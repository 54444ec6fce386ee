package verify

const docusignBody = `{"event":"envelope-completed","apiVersion":"v2.1","uri":"/restapi/v2.1/accounts/1/envelopes/e1","data":{"accountId":"1","envelopeId":"e1"}}`

var _ = providerTest("docusign", providerTests{
	vectors: []vector{{
		name:   "envelope-completed, second key",
		source: "computed from https://developers.docusign.com/platform/webhooks/connect/hmac/: base64 HMAC-SHA256 of the body, one X-DocuSign-Signature-N header per key",
		cfg:    Config{Scheme: "docusign", Secrets: []string{genericSecret}},
		req: post(docusignBody, "X-DocuSign-Signature-1", b64MAC(sha256H, "rotated-out-secret-0001", docusignBody),
			"X-DocuSign-Signature-2", b64MAC(sha256H, genericSecret, docusignBody)),
		now:  testNow,
		want: Result{DeliveryID: sha256Hex(b64MAC(sha256H, "rotated-out-secret-0001", docusignBody)), Event: "envelope-completed"},
	}},
})
