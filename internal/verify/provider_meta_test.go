package verify

const (
	metaSecret = "6b2a5e8f0c1d4e7a9b3c5d8e0f2a4b6c"
	metaToken  = "meta-verify-token-1"
	metaBody   = `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","messages":[{"from":"16315551181","id":"wamid.ABGGFlA5Fpa","type":"text","text":{"body":"Book a table for two"}}]}}]}]}`
)

var metaCfg = Config{Scheme: "meta", Secrets: []string{metaSecret}, VerifyToken: metaToken}

var _ = providerTest("meta", providerTests{
	vectors: []vector{{
		name:   "WhatsApp text message",
		source: "computed from https://developers.facebook.com/docs/graph-api/webhooks/getting-started#event-notifications: sha256= hex HMAC-SHA256 of the body under the app secret",
		cfg:    metaCfg,
		req:    post(metaBody, "X-Hub-Signature-256", "sha256="+hexMAC(sha256H, metaSecret, metaBody)),
		now:    testNow,
		want:   Result{DeliveryID: sha256Hex("sha256=" + hexMAC(sha256H, metaSecret, metaBody)), Event: "whatsapp_business_account.messages"},
	}},
	handshakes: []handshakeCase{{
		name:   "subscribe with the verify token",
		source: "vector from https://developers.facebook.com/docs/graph-api/webhooks/getting-started#verification-requests",
		req:    req("GET", hookURL+"?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token="+metaToken, ""),
		status: 200, body: "1158201444", ctype: "text/plain",
	}, {
		name:     "wrong verify token",
		req:      req("GET", hookURL+"?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=guess", ""),
		wantFail: ReasonBadHandshake,
	}, {
		name:     "not subscribe",
		req:      req("GET", hookURL+"?hub.mode=unsubscribe&hub.challenge=1&hub.verify_token="+metaToken, ""),
		wantFail: ReasonBadHandshake,
	}, {
		name:     "challenge with a control byte",
		req:      req("GET", hookURL+"?hub.mode=subscribe&hub.challenge=a%0Ab&hub.verify_token="+metaToken, ""),
		wantFail: ReasonBadHandshake,
	}, {
		name:  "a GET without hub.mode",
		req:   req("GET", hookURL+"?x=1", ""),
		notHS: true,
	}},
})
