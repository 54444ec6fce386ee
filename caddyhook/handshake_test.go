package caddyhook

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// providerMappings are the signing mappings of the handshake and form
// tests: one per provider, on the provider's name, with the provider's
// default template (none is set).
func providerMappings() []Mapping {
	return []Mapping{
		{ID: "meta", MatchPath: "meta", Verify: &verify.Config{Scheme: "meta", Secrets: []string{pvMetaSecret}, VerifyToken: pvMetaToken}},
		{ID: "discord", MatchPath: "discord", Verify: &verify.Config{Scheme: "discord", PublicKeys: []string{pvDiscordPublicKey()}}},
		{ID: "zoom", MatchPath: "zoom", Verify: &verify.Config{Scheme: "zoom", Secrets: []string{pvZoomSecret}}},
		{ID: "twilio", MatchPath: "twilio", Verify: &verify.Config{Scheme: "twilio", Secrets: []string{pvTwilioSecret}}},
		{ID: "shopify", MatchPath: "shopify", Verify: &verify.Config{Scheme: "shopify", Secrets: []string{pvShopifySecret}}},
		{ID: "graph", MatchPath: "graph", Verify: &verify.Config{Scheme: "msgraph", ClientState: pvGraphState}},
		{ID: "github", MatchPath: "github", Verify: githubConfig(sigGitHubSecret)},
		{ID: "plain", MatchPath: "plain", MessageTemplate: "plain {{text}}"},
	}
}

// TestHandshakeMethods: a method other than POST is taken only on a hook
// name whose provider's handshake comes with it, and only for the
// handshake; anything else is 405 with the hook name's Allow.
func TestHandshakeMethods(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) { h.Mappings = providerMappings() })
	hub := "hub.mode=subscribe&hub.verify_token=" + pvMetaToken + "&hub.challenge=1158201444"
	for _, tc := range []struct {
		name, method, target string
		hdr                  []string
		status               int
		allow                string
		body                 string
	}{
		{"meta GET handshake", "GET", "/hooks/meta?" + hub, nil, 200, "", "1158201444"},
		{"meta GET handshake with the token too", "GET", "/hooks/meta?" + hub, auth, 200, "", "1158201444"},
		{"meta GET without hub.mode", "GET", "/hooks/meta?x=1", nil, 405, "POST, GET", ""},
		{"meta HEAD", "HEAD", "/hooks/meta?" + hub, nil, 405, "POST, GET", ""},
		{"meta PUT", "PUT", "/hooks/meta?" + hub, nil, 405, "POST, GET", ""},
		{"graph GET validationToken", "GET", "/hooks/graph?validationToken=Validation%3A+Testing", nil, 200, "", "Validation: Testing"},
		{"graph GET without it", "GET", "/hooks/graph", nil, 405, "POST, GET", ""},
		{"github GET", "GET", "/hooks/github?hub.mode=subscribe", nil, 405, "POST", ""},
		{"plain GET with token", "GET", "/hooks/plain", auth, 405, "POST", ""},
		{"wake GET", "GET", "/hooks/wake", auth, 405, "POST", ""},
		{"unknown GET", "GET", "/hooks/nothing?hub.mode=subscribe", nil, 405, "POST", ""},
		{"handshake queries are not token parameters", "GET", "/hooks/meta?" + hub + "&validationToken=x&crc_token=y", nil, 200, "", "1158201444"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(t, h, hookRequest{method: tc.method, target: tc.target, header: tc.hdr})
			if w.Code != tc.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.status)
			}
			if got := w.Header().Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
			if tc.status == 200 {
				if got := w.Body.String(); got != tc.body || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
					t.Errorf("answer %q (%s), want %q as text/plain", got, w.Header().Get("Content-Type"), tc.body)
				}
			}
		})
	}
	if n := len(gw.Received()); n != 0 {
		t.Fatalf("handshakes dispatched %d requests", n)
	}
}

// TestHandshakeAnswers: the POST handshakes are answered at the edge with
// what each provider expects, never dispatched; a wrong verify_token or a
// bad signature is 401 counted by the lockout (three failures lock in
// this test), and a locked address gets 429 for a handshake too.
func TestHandshakeAnswers(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) {
		h.Mappings = providerMappings()
		h.AuthFailures = &AuthFailures{Count: 3}
	})
	now := time.Now()
	ping := `{"id":"1","application_id":"2","type":1,"version":1}`
	zoom := `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
	hub := "hub.mode=subscribe&hub.verify_token=" + pvMetaToken + "&hub.challenge=1158201444"
	for _, tc := range []struct {
		name, method, target, body, remote string
		hdr                                []string
		status                             int
		want                               string
	}{
		{"discord PING", "POST", "/hooks/discord", ping, "", headerPairs(discordHeaders(pvDiscordKey, ping, now)...), 200, `{"type":1}`},
		{"zoom url_validation", "POST", "/hooks/zoom", zoom, "", headerPairs(zoomHeaders(pvZoomSecret, zoom, now)...), 200,
			`{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"` + zoomEncrypted(pvZoomSecret, "qgg8vlvZRS6UYooatFL8Aw") + `"}`},
		{"graph POST validationToken", "POST", "/hooks/graph?validationToken=abc", "", "", nil, 200, "abc"},
		{"meta wrong verify_token", "GET", "/hooks/meta?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1", "", "192.0.2.7", nil, 401, ""},
		{"discord PING bad signature", "POST", "/hooks/discord", ping, "192.0.2.7", headerPairs(discordHeaders(pvDiscordKey, `{"type":1}`, now)...), 401, ""},
		{"zoom url_validation unsigned", "POST", "/hooks/zoom", zoom, "192.0.2.7", nil, 401, ""},
		{"locked: the right verify_token too", "GET", "/hooks/meta?" + hub, "", "192.0.2.7", nil, 429, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(t, h, hookRequest{method: tc.method, target: tc.target, body: tc.body, remote: tc.remote, header: headers(jsonCT, tc.hdr)})
			if w.Code != tc.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.status)
			}
			if tc.want != "" && w.Body.String() != tc.want {
				t.Fatalf("answer %s, want %s", w.Body, tc.want)
			}
		})
	}
	if n := len(gw.Received()); n != 0 {
		t.Fatalf("handshakes dispatched %d requests", n)
	}
}

// TestProviderForms: a provider that posts forms (Twilio) is verified
// over the form and the URL, and its mapping's templates and CEL see the
// fields; the edge answers the provider's acknowledgement (empty TwiML).
// A form to a hook name without such a provider stays 415.
func TestProviderForms(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) {
		h.Mappings = providerMappings()
		h.Mappings = append([]Mapping{{ID: "sms-stop", MatchPath: "twilio", MatchExpr: `payload.Body == "STOP" && event == "message.received"`,
			Action: "wake", TextTemplate: "{{event}}: {{From}} opted out", Verify: h.Mappings[3].Verify}}, h.Mappings...)
	})
	form := url.Values{"MessageSid": {"SM1"}, "SmsStatus": {"received"}, "From": {"+15551234567"}, "To": {"+15557654321"}, "Body": {"Hello agent"}}.Encode()
	w := serve(t, h, hookRequest{target: "/hooks/twilio", body: form,
		header: headerPairs(twilioHeaders(pvTwilioSecret, "http://example.com/hooks/twilio", form)...)})
	if w.Code != 200 || w.Body.String() != `<?xml version="1.0" encoding="UTF-8"?><Response></Response>` || w.Header().Get("Content-Type") != "text/xml" {
		t.Fatalf("answer %d %s (%s), want 200 empty TwiML", w.Code, w.Body, w.Header().Get("Content-Type"))
	}
	if got, want := lastMessage(t, gw), "Twilio message.received from +15551234567 to +15557654321: Hello agent"; !strings.Contains(got, want) {
		t.Fatalf("message %q, want it to contain %q", got, want)
	}
	stop := url.Values{"MessageSid": {"SM2"}, "SmsStatus": {"received"}, "From": {"+15551234567"}, "Body": {"STOP"}}.Encode()
	serve(t, h, hookRequest{target: "/hooks/twilio", body: stop, header: headerPairs(twilioHeaders(pvTwilioSecret, "http://example.com/hooks/twilio", stop)...)})
	got := gw.Received()
	if last := got[len(got)-1]; last.Kind != "wake" || !strings.Contains(last.Body["text"].(string), "message.received: +15551234567 opted out") {
		t.Fatalf("last dispatch %s %v, want the sms-stop wake", last.Kind, last.Body)
	}
	for _, tc := range []struct {
		name, target, body string
		hdr                []string
		status             int
	}{
		{"signed for another URL", "/hooks/twilio", form, headerPairs(twilioHeaders(pvTwilioSecret, "https://example.com/hooks/twilio", form)...), 401},
		{"tampered field", "/hooks/twilio", strings.Replace(form, "Hello", "Hullo", 1), headerPairs(twilioHeaders(pvTwilioSecret, "http://example.com/hooks/twilio", form)...), 401},
		{"form to a JSON provider", "/hooks/github", form, headers(headerPairs(githubHeaders(sigGitHubSecret, form, "")...), []string{"Content-Type", "application/x-www-form-urlencoded"}), 415},
		{"form with the token to a token mapping", "/hooks/plain", form, headers(auth, []string{"Content-Type", "application/x-www-form-urlencoded"}), 415},
		{"form to wake", "/hooks/wake", "text=x", headers(auth, []string{"Content-Type", "application/x-www-form-urlencoded"}), 415},
		{"text/plain to twilio", "/hooks/twilio", form, headers(headerPairs(twilioHeaders(pvTwilioSecret, "http://example.com/hooks/twilio", form)...)[:2], []string{"Content-Type", "text/plain"}), 415},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := serve(t, h, hookRequest{target: tc.target, body: tc.body, header: tc.hdr}); w.Code != tc.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.status)
			}
		})
	}
}

// TestProviderDefaults: a mapping with only a verify block renders its
// provider's default template, {{event}} and CEL's event are the
// provider's event, the provider's delivery id is the idempotency key
// (a redelivery dispatches once), and an acknowledgement answers a
// replay too.
func TestProviderDefaults(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) {
		h.Mappings = providerMappings()
		h.Mappings = append(h.Mappings, Mapping{ID: "discord-cmd", MatchPath: "discord-cmd", Action: "wake",
			MatchExpr: `event == "ask"`, TextTemplate: "/{{event}} {{data.options.0.value}}",
			Verify: &verify.Config{Scheme: "discord", PublicKeys: []string{pvDiscordPublicKey()}}})
	})
	order := `{"id":820982911946154500,"name":"#1001","email":"jon@example.com","total_price":"403.00","currency":"USD"}`
	for range 2 { // a redelivery: the same X-Shopify-Webhook-Id
		w := serve(t, h, hookRequest{target: "/hooks/shopify", body: order, header: headers(jsonCT, headerPairs(shopifyHeaders(pvShopifySecret, order, "orders/create", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043")...))})
		if w.Code != 200 {
			t.Fatalf("status %d (%s)", w.Code, w.Body)
		}
	}
	if n := len(gw.Received()); n != 1 {
		t.Fatalf("a redelivery with the same X-Shopify-Webhook-Id dispatched %d times, want once", n)
	}
	if got, want := lastMessage(t, gw), "Shopify orders/create from shop.myshopify.com: order #1001 403.00 USD by jon@example.com"; !strings.Contains(got, want) {
		t.Fatalf("message %q, want it to contain %q", got, want)
	}
	if key := gw.Received()[0].IdempotencyKey; key == "" {
		t.Error("the delivery id reached the gateway as no idempotency key")
	}
	cmd := `{"id":"3","type":2,"data":{"name":"ask","options":[{"name":"q","value":"the weather"}]},"member":{"user":{"username":"ann"}}}`
	for i := range 2 {
		w := serve(t, h, hookRequest{target: "/hooks/discord-cmd", body: cmd, header: headers(jsonCT, headerPairs(discordHeaders(pvDiscordKey, cmd, time.Now())...))})
		if w.Code != 200 || w.Body.String() != `{"type":5}` {
			t.Fatalf("answer %d: %d %s, want the deferred response {\"type\":5}", i, w.Code, w.Body)
		}
	}
	got := gw.Received()
	if len(got) != 2 || got[1].Body["text"] != "/ask the weather" {
		t.Fatalf("dispatched %d, last %v; want one wake /ask the weather", len(got), got[len(got)-1].Body)
	}
	other := `{"id":"4","type":2,"data":{"name":"other"}}`
	if w := serve(t, h, hookRequest{target: "/hooks/discord-cmd", body: other, header: headers(jsonCT, headerPairs(discordHeaders(pvDiscordKey, other, time.Now())...))}); w.Code != 404 {
		t.Fatalf("a command match_expr refuses: %d %s, want 404", w.Code, w.Body)
	}
}

// TestProviderForwardForm: in forward mode a provider's form crosses to
// the gateway as the JSON object it stands for, with Content-Type
// application/json; the provider's credentials do not cross.
func TestProviderForwardForm(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) {
		h.Mode = "forward"
		h.Mappings = []Mapping{{ID: "twilio", MatchPath: "twilio", Forward: true, Verify: &verify.Config{Scheme: "twilio", Secrets: []string{pvTwilioSecret}}}}
	})
	form := "From=%2B15551234567&Body=Hi+there&Body=again&MessageSid=SM9&SmsStatus=received"
	w := serve(t, h, hookRequest{target: "/hooks/twilio", body: form, header: headerPairs(twilioHeaders(pvTwilioSecret, "http://example.com/hooks/twilio", form)...)})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "<Response>") {
		t.Fatalf("answer %d %s, want 200 TwiML", w.Code, w.Body)
	}
	got := gw.Received()
	if len(got) != 1 {
		t.Fatalf("gateway received %d", len(got))
	}
	r := got[0]
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if r.Header.Get("X-Twilio-Signature") != "" {
		t.Error("the signature crossed to the gateway")
	}
	var body map[string]any
	if err := json.Unmarshal(r.Raw, &body); err != nil {
		t.Fatalf("the gateway got %q: %v", r.Raw, err)
	}
	if body["From"] != "+15551234567" || body["MessageSid"] != "SM9" || len(body["Body"].([]any)) != 2 {
		t.Fatalf("the gateway got %s", r.Raw)
	}
	if r.Path != "twilio" || r.Kind != "hook" {
		t.Fatalf("forwarded to %s (%s)", r.Path, r.Kind)
	}
	_ = http.StatusOK
}
