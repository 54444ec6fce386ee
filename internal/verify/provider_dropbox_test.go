package verify

const dropboxBody = `{"list_folder":{"accounts":["dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc"]},"delta":{"users":[12345678]}}`

var _ = providerTest("dropbox", providerTests{
	vectors: []vector{{
		name:   "list_folder",
		source: "computed from https://www.dropbox.com/developers/reference/webhooks: hex HMAC-SHA256 of the body under the app secret",
		cfg:    Config{Scheme: "dropbox", Secrets: []string{genericSecret}},
		req:    post(dropboxBody, "X-Dropbox-Signature", hexMAC(sha256H, genericSecret, dropboxBody)),
		now:    testNow,
		want:   Result{DeliveryID: sha256Hex(hexMAC(sha256H, genericSecret, dropboxBody)), Event: "list_folder"},
	}},
	handshakes: []handshakeCase{{
		name:   "challenge",
		source: "computed from https://www.dropbox.com/developers/reference/webhooks: echo the challenge parameter as text/plain with nosniff",
		req:    req("GET", hookURL+"?challenge=abc123", ""),
		status: 200, body: "abc123", ctype: "text/plain", header: [2]string{"X-Content-Type-Options", "nosniff"},
	}, {
		name:     "empty challenge",
		req:      req("GET", hookURL+"?challenge=", ""),
		wantFail: ReasonBadChallenge,
	}},
})
