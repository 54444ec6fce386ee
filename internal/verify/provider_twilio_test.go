package verify

import (
	"net/url"
	"testing"
)

// TestTwilioPublishedExample checks the signed string against the worked
// example of Twilio's webhook security page (auth token 12345, shorter
// than a configurable secret, so checked on the algorithm).
// Vector from https://www.twilio.com/docs/usage/webhooks/webhooks-security
func TestTwilioPublishedExample(t *testing.T) {
	body := "To=%2B18005551212&CallSid=CA1234567890ABCDE&Digits=1234&From=%2B12349013030&Caller=%2B12349013030"
	f, err := ParseForm([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r := req("POST", "https://mycompany.com/myapp.php?foo=1&bar=2", body)()
	signed := PublicURL(r, "") + string(f.sortedPairs(nil))
	if want := "https://mycompany.com/myapp.php?foo=1&bar=2CallSidCA1234567890ABCDECaller+12349013030Digits1234From+12349013030To+18005551212"; signed != want {
		t.Fatalf("signed string %q\nwant %q", signed, want)
	}
	if got := b64MAC(sha1H, "12345", signed); got != "0/KCTR6DLpKmkAf8muzZqo1nDgQ=" {
		t.Fatalf("signature %s, want Twilio's 0/KCTR6DLpKmkAf8muzZqo1nDgQ=", got)
	}
	m := newMACSet(algSHA1, [][]byte{[]byte("12345")})
	var c candidates
	if r := c.add(encBase64, m.size, "0/KCTR6DLpKmkAf8muzZqo1nDgQ="); r != "" || !m.match(&c, []byte(signed)) {
		t.Fatal("the package's MAC does not match Twilio's example")
	}
}

const twilioToken = "9bd4e3f7c8a2d1e0f9a8b7c6d5e4f3a2"

var (
	twilioSMS = url.Values{"MessageSid": {"SM1a2b3c"}, "SmsSid": {"SM1a2b3c"}, "SmsStatus": {"received"},
		"From": {"+15017122661"}, "To": {"+15558675310"}, "Body": {"Hello agent"}, "NumMedia": {"0"}}
	twilioSMSBody = twilioSMS.Encode()
	twilioJSON    = `{"AccountSid":"AC1","CallSid":"CA9","CallStatus":"completed","From":"+15017122661","To":"+15558675310"}`
	twilioJSONURL = hookURL + "?bodySHA256=" + sha256Hex(twilioJSON)
)

var _ = providerTest("twilio", providerTests{
	vectors: []vector{{
		name:   "inbound SMS form",
		source: "computed from https://www.twilio.com/docs/usage/webhooks/webhooks-security: base64 HMAC-SHA1 of the URL followed by the sorted field names and values (the algorithm is checked against Twilio's example in TestTwilioPublishedExample)",
		cfg:    Config{Scheme: "twilio", Secrets: []string{twilioToken}},
		req: post(twilioSMSBody, "Content-Type", formCT, "X-Twilio-Signature",
			b64MAC(sha1H, twilioToken, hookURL, "BodyHello agent", "From+15017122661", "MessageSidSM1a2b3c", "NumMedia0",
				"SmsSidSM1a2b3c", "SmsStatusreceived", "To+15558675310")),
		now:  testNow,
		want: Result{DeliveryID: "SM1a2b3c", Event: "message.received"},
	}, {
		name:   "JSON body with bodySHA256",
		source: "computed from https://www.twilio.com/docs/usage/webhooks/webhooks-security: JSON bodies sign the URL, whose bodySHA256 is the body's hex SHA-256",
		cfg:    Config{Scheme: "twilio", Secrets: []string{twilioToken}},
		req: req("POST", twilioJSONURL, twilioJSON, "Content-Type", "application/json",
			"X-Twilio-Signature", b64MAC(sha1H, twilioToken, twilioJSONURL)),
		now:  testNow,
		want: Result{DeliveryID: "CA9", Event: "call.completed"},
	}},
})

// TestTwilioFormPayload checks what a mapping sees of an SMS: its Body
// and From as strings, and the empty TwiML acknowledgement.
func TestTwilioFormPayload(t *testing.T) {
	pt := providerTestsByName["twilio"]
	v := mustNew(t, pt.vectors[0].cfg)
	res, err := v.VerifyRequest(pt.vectors[0].req(), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if jsonField(res.Payload, "Body") != "Hello agent" || jsonField(res.Payload, "From") != "+15017122661" {
		t.Fatalf("payload %s", res.Payload)
	}
	if res.Ack == nil || res.Ack.Header.Get("Content-Type") != "text/xml" {
		t.Fatalf("ack %+v", res.Ack)
	}
	// a JSON body whose bodySHA256 does not match
	bad := req("POST", hookURL+"?bodySHA256="+sha256Hex("other"), twilioJSON, "Content-Type", "application/json",
		"X-Twilio-Signature", b64MAC(sha1H, twilioToken, hookURL+"?bodySHA256="+sha256Hex("other")))()
	if _, err := v.VerifyRequest(bad, testNow); err == nil {
		t.Fatal("a JSON body not matching bodySHA256 verified")
	}
}
