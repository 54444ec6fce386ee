package caddyhook

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
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
	// caddy_hooks_handshakes_total: the collectors outlive a handler (a
	// reload keeps counting), so the test counts the differences
	handshakes := func(provider, outcome string) float64 {
		return counterValue(t, h.metrics.handshakes.WithLabelValues(provider, outcome))
	}
	type count struct{ provider, outcome string }
	counted := []count{{"discord", handshakeAnswered}, {"zoom", handshakeAnswered}, {"msgraph", handshakeAnswered},
		{"meta", handshakeAnswered}, {"meta", handshakeRefused}, {"discord", handshakeRefused}, {"zoom", handshakeRefused}}
	before := map[count]float64{}
	for _, c := range counted {
		before[c] = handshakes(c.provider, c.outcome)
	}
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
	// one each, and the locked address's handshake (429) is no handshake
	for _, c := range counted {
		want := 1.0
		if c == (count{"meta", handshakeAnswered}) {
			want = 0
		}
		if got := handshakes(c.provider, c.outcome) - before[c]; got != want {
			t.Errorf("caddy_hooks_handshakes_total{provider=%q,outcome=%q} counted %v, want %v", c.provider, c.outcome, got, want)
		}
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

// snsStub is an SNS service for a verifier's HTTP client: it serves the
// signing certificate of key at any *.pem URL and answers every other
// GET (a SubscribeURL) 200, recording the URLs; fail makes it answer 500.
type snsStub struct {
	cert []byte
	mu   sync.Mutex
	got  []string
	fail bool
}

// RoundTrip implements http.RoundTripper.
func (s *snsStub) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.got = append(s.got, r.URL.String())
	fail := s.fail
	s.mu.Unlock()
	status, body := http.StatusOK, []byte("<ConfirmSubscriptionResponse/>")
	switch {
	case fail:
		status, body = http.StatusInternalServerError, nil
	case strings.HasSuffix(r.URL.Path, ".pem"):
		body = s.cert
	}
	return &http.Response{StatusCode: status, Body: io.NopCloser(bytes.NewReader(body)), Header: http.Header{}, Request: r}, nil
}

// newSNSStub is an snsStub serving a certificate of key's.
func newSNSStub(t *testing.T, key *rsa.PrivateKey) *snsStub {
	t.Helper()
	tmplCert := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmplCert, tmplCert, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &snsStub{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// fetched lists the URLs the stub was asked for.
func (s *snsStub) fetched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// snsMessage is an SNS message of type typ signed as SNS signs
// (SignatureVersion 2: RSA SHA-256 of the canonical string) under key.
func snsMessage(t *testing.T, key *rsa.PrivateKey, typ, topic, msg string, at time.Time) string {
	t.Helper()
	m := map[string]string{"Type": typ, "MessageId": "mid-" + typ, "TopicArn": topic, "Message": msg,
		"Timestamp": at.UTC().Format("2006-01-02T15:04:05.000Z"), "SignatureVersion": "2",
		"SigningCertURL": "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-test.pem"}
	fields := []string{"Message", "MessageId", "Timestamp", "TopicArn", "Type"}
	if typ == "Notification" {
		m["Subject"] = "CPU alarm"
		fields = []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	} else {
		m["Token"] = "tok-123"
		m["SubscribeURL"] = "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=" + url.QueryEscape(topic) + "&Token=tok-123"
		fields = []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	}
	var canon strings.Builder
	for _, f := range fields {
		canon.WriteString(f + "\n" + m[f] + "\n")
	}
	sum := sha256.Sum256([]byte(canon.String()))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	m["Signature"] = base64.StdEncoding.EncodeToString(sig)
	b, _ := json.Marshal(m)
	return string(b)
}

// TestProviderSNS: the X.509 family through the handler, its key
// fetched by a stub client (a Caddy config cannot point SNS's allow-list
// at a test server): a SubscriptionConfirmation from an accepted topic is
// confirmed by a GET of its SubscribeURL and answered, never dispatched;
// a notification (posted as text/plain, as SNS posts) renders the
// provider's template; a certificate that cannot be fetched is 503 with
// Retry-After, not counted by the lockout; another topic is 401.
func TestProviderSNS(t *testing.T) {
	key := pvGoogleKey() // any RSA key
	stub := newSNSStub(t, key)
	const topic = "arn:aws:sns:eu-west-1:123456789012:alarms"
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) {
		h.verifyEnv = verify.Env{HTTPClient: &http.Client{Transport: stub}}
		h.AuthFailures = &AuthFailures{Count: 2}
		h.Mappings = []Mapping{{ID: "alarms", MatchPath: "alarms", Verify: &verify.Config{Scheme: "sns", Topics: []string{topic}}}}
	})
	snsCT := []string{"Content-Type", "text/plain; charset=UTF-8"}
	send := func(body, remote string) *httptest.ResponseRecorder {
		return serve(t, h, hookRequest{target: "/hooks/alarms", body: body, remote: remote, header: snsCT})
	}
	if w := send(snsMessage(t, key, "SubscriptionConfirmation", topic, "You have chosen to subscribe", time.Now()), ""); w.Code != 200 {
		t.Fatalf("confirmation: %d %s", w.Code, w.Body)
	}
	if got := stub.fetched(); len(got) != 2 || !strings.Contains(got[1], "Action=ConfirmSubscription") {
		t.Fatalf("fetched %q, want the certificate and the SubscribeURL", got)
	}
	if n := len(gw.Received()); n != 0 {
		t.Fatalf("the confirmation was dispatched (%d)", n)
	}
	if w := send(snsMessage(t, key, "Notification", topic, "CPU above 90% on web-1", time.Now()), ""); w.Code != 200 {
		t.Fatalf("notification: %d %s", w.Code, w.Body)
	}
	if got, want := lastMessage(t, gw), "Amazon SNS CPU alarm on "+topic+": CPU above 90% on web-1"; !strings.Contains(got, want) {
		t.Fatalf("message %q, want it to contain %q", got, want)
	}
	if w := send(snsMessage(t, key, "Notification", "arn:aws:sns:eu-west-1:123456789012:other", "x", time.Now()), ""); w.Code != 401 {
		t.Fatalf("another topic: %d %s, want 401", w.Code, w.Body)
	}
	stub.mu.Lock()
	stub.fail = true
	stub.mu.Unlock()
	// a confirmation whose certificate cannot be fetched is a handshake
	// that could not be completed: 503, caddy_hooks_handshakes_total's
	// unavailable (the answered one above counted too)
	hs := func(outcome string) float64 {
		return counterValue(t, h.metrics.handshakes.WithLabelValues("sns", outcome))
	}
	answered, unavailable := hs(handshakeAnswered), hs(handshakeUnavailable)
	confirm := strings.Replace(snsMessage(t, key, "SubscriptionConfirmation", topic, "again", time.Now()), "test.pem", "rotated.pem", 1)
	if w := send(confirm, ""); w.Code != 503 || w.Header().Get("Retry-After") != "30" {
		t.Fatalf("confirmation, certificate unavailable: %d %s, want 503", w.Code, w.Body)
	}
	if a, u := hs(handshakeAnswered)-answered, hs(handshakeUnavailable)-unavailable; a != 0 || u != 1 {
		t.Fatalf("handshakes counted: answered +%v, unavailable +%v; want +0, +1", a, u)
	}
	if answered < 1 {
		t.Fatalf("the answered confirmation was not counted (%v)", answered)
	}
	// a certificate not fetched yet (another URL) cannot be fetched: 503,
	// three times from one address without a lock (2 failures lock)
	for range 3 {
		msg := strings.Replace(snsMessage(t, key, "Notification", topic, "y", time.Now()), "test.pem", "rotated.pem", 1)
		w := send(msg, "192.0.2.99")
		if w.Code != 503 || w.Header().Get("Retry-After") != "30" {
			t.Fatalf("certificate unavailable: %d %s (Retry-After %q), want 503 30", w.Code, w.Body, w.Header().Get("Retry-After"))
		}
	}
}

// TestProviderSNSForward: in forward mode an SNS notification, posted as
// text/plain, crosses to the gateway as the JSON it is, with
// Content-Type application/json (the gateway takes JSON only).
func TestProviderSNSForward(t *testing.T) {
	key := pvGoogleKey()
	stub := newSNSStub(t, key)
	const topic = "arn:aws:sns:eu-west-1:123456789012:alarms"
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) {
		h.Mode = "forward"
		h.verifyEnv = verify.Env{HTTPClient: &http.Client{Transport: stub}}
		h.Mappings = []Mapping{{ID: "alarms", MatchPath: "alarms", Forward: true, Verify: &verify.Config{Scheme: "sns", Topics: []string{topic}}}}
	})
	body := snsMessage(t, key, "Notification", topic, "CPU high", time.Now())
	if w := serve(t, h, hookRequest{target: "/hooks/alarms", body: body, header: []string{"Content-Type", "text/plain; charset=UTF-8"}}); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	got := gw.Received()
	if len(got) != 1 || string(got[0].Raw) != body || got[0].Header.Get("Content-Type") != "application/json" {
		t.Fatalf("the gateway got %d requests: %+v", len(got), got)
	}
}

// TestProviderSlackForms: Slack's slash commands and interactivity post
// forms signed like its Events API; on the same hook name they are taken,
// the command's fields (and interactivity's payload= JSON, embedded) are
// the payload, and Slack gets its empty 200 within its 3 s.
func TestProviderSlackForms(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	slack := &verify.Config{Scheme: "slack", Secrets: []string{sigSlackSecret}}
	h := newTestHandler(t, gw, func(h *Handler) {
		h.Mappings = []Mapping{
			{ID: "slack-action", MatchPath: "slack", MatchExpr: `has(payload.payload)`, Action: "wake",
				TextTemplate: "{{payload.payload.type}} by {{payload.payload.user.username}}: {{payload.payload.actions.0.value}}", Verify: slack},
			{ID: "slack", MatchPath: "slack", Verify: slack},
		}
	})
	form := "command=%2Fask&text=is+the+build+green%3F&user_name=ann&team_id=T1&trigger_id=13345224609.738474920.8088930838d88f008e0"
	w := serve(t, h, hookRequest{target: "/hooks/slack", body: form,
		header: headers(headerPairs(slackHeaders(sigSlackSecret, form, time.Now())...), []string{"Content-Type", "application/x-www-form-urlencoded"})})
	if w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("slash command: %d %q, want Slack's empty 200", w.Code, w.Body)
	}
	if got, want := lastMessage(t, gw), "Slack /ask from ann: is the build green?"; !strings.Contains(got, want) {
		t.Fatalf("message %q, want it to contain %q", got, want)
	}
	action := "payload=" + url.QueryEscape(`{"type":"block_actions","user":{"username":"bob"},"actions":[{"value":"approve"}]}`)
	w = serve(t, h, hookRequest{target: "/hooks/slack", body: action,
		header: headers(headerPairs(slackHeaders(sigSlackSecret, action, time.Now())...), []string{"Content-Type", "application/x-www-form-urlencoded"})})
	if w.Code != 200 {
		t.Fatalf("interactivity: %d %s", w.Code, w.Body)
	}
	got := gw.Received()
	if last := got[len(got)-1]; last.Kind != "wake" || last.Body["text"] != "block_actions by bob: approve" {
		t.Fatalf("last dispatch %s %v", last.Kind, last.Body)
	}
}
