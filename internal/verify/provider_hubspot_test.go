package verify

import "strconv"

const hubspotBody = `[{"eventId":1,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM","changeFlag":"NEW","appId":54321}]`

var hubspotTS = strconv.FormatInt(testNow.UnixMilli(), 10)

var _ = providerTest("hubspot", providerTests{
	vectors: []vector{{
		name:   "contact.creation",
		source: "computed from https://developers.hubspot.com/docs/apps/developer-platform/build-apps/authentication/request-validation: base64 HMAC-SHA256 of POST, the decoded URI, the body and the millisecond timestamp",
		cfg:    Config{Scheme: "hubspot", Secrets: []string{"yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy"}},
		req: req("POST", "https://hooks.example.com/hooks/p?portal=62515&cb=a%3Ab", hubspotBody, "X-HubSpot-Request-Timestamp", hubspotTS,
			"X-HubSpot-Signature-v3", b64MAC(sha256H, "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy",
				"POST", "https://hooks.example.com/hooks/p?portal=62515&cb=a:b", hubspotBody, hubspotTS)),
		now: testNow,
		want: Result{DeliveryID: bodyID(hubspotBody), Event: "contact.creation",
			Payload: []byte(`{"events":` + hubspotBody + `}`)},
	}},
})
