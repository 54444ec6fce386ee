package verify

const pagerdutyBody = `{"event":{"id":"01DEN1HNLBC1VITEMA2","event_type":"incident.triggered","data":{"title":"Disk full","urgency":"high","html_url":"https://acme.pagerduty.com/incidents/PGR0VU2"}}}`

var _ = providerTest("pagerduty", providerTests{
	vectors: []vector{{
		name:   "incident.triggered during a rotation",
		source: "computed from https://developer.pagerduty.com/docs/webhooks/v3-overview/#verifying-signatures: v1=<hex HMAC-SHA256(body)>, one per secret",
		cfg:    Config{Scheme: "pagerduty", Secrets: []string{genericSecret}},
		req: post(pagerdutyBody, "X-PagerDuty-Signature",
			"v1="+hexMAC(sha256H, "rotated-out-secret-0001", pagerdutyBody)+",v1="+hexMAC(sha256H, genericSecret, pagerdutyBody)),
		now:  testNow,
		want: Result{DeliveryID: "01DEN1HNLBC1VITEMA2", Event: "incident.triggered"},
	}},
})
