package caddyhook

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// providerHooks are the hooks lines of the provider integration tests:
// one mapping per provider, each with its verify block only.
func providerHooks() string {
	return `
		mapping whatsapp {
			match_path whatsapp
			verify meta {
				secret {env.CH_IT_META_SECRET}
				verify_token {env.CH_IT_META_TOKEN}
			}
		}
		mapping discord {
			match_path discord
			verify discord {
				public_key ` + pvDiscordPublicKey() + `
			}
		}
		mapping zoom {
			match_path zoom
			verify zoom {
				secret {env.CH_IT_ZOOM_SECRET}
			}
		}
		mapping sms {
			match_path sms
			verify twilio {
				secret {env.CH_IT_TWILIO_SECRET}
			}
		}`
}

// setProviderEnv puts the provider secrets where providerHooks looks.
func setProviderEnv(t *testing.T) {
	t.Helper()
	for name, v := range map[string]string{"CH_IT_META_SECRET": pvMetaSecret, "CH_IT_META_TOKEN": pvMetaToken,
		"CH_IT_ZOOM_SECRET": pvZoomSecret, "CH_IT_TWILIO_SECRET": pvTwilioSecret} {
		t.Setenv(name, v)
	}
}

// TestIntegrationProviderAcceptance (issue 29's acceptance, through the
// real Caddy): a Meta GET handshake answers the challenge (200,
// text/plain) only with the right verify_token; Discord's PING answers
// {"type":1}; Zoom's url_validation answers its encryptedToken; none of
// them reaches the gateway; Twilio's form SMS is verified over the URL
// Caddy served and reaches the agent with its Body and From, answered
// with empty TwiML. The refusals are counted by the lockout and logged
// without the secrets.
func TestIntegrationProviderAcceptance(t *testing.T) {
	setProviderEnv(t)
	in := startIngress(t, ingressOpts{hooks: providerHooks()})

	hub := url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {pvMetaToken}, "hub.challenge": {"1158201444"}}
	r := in.do("GET", "/hooks/whatsapp?"+hub.Encode(), "")
	if r.status != 200 || r.body != "1158201444" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("meta handshake: %d %q (%s), want 200 1158201444 text/plain", r.status, r.body, r.header.Get("Content-Type"))
	}
	hub.Set("hub.verify_token", "not-the-token")
	if r := in.do("GET", "/hooks/whatsapp?"+hub.Encode(), ""); r.status != 401 || strings.Contains(r.body, "1158201444") {
		t.Fatalf("meta handshake with a wrong verify_token: %d %q, want 401", r.status, r.body)
	}
	if r := in.do("GET", "/hooks/sms", ""); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Fatalf("GET where no handshake comes: %d (Allow %q), want 405 POST", r.status, r.header.Get("Allow"))
	}

	now := time.Now()
	ping := `{"id":"1","application_id":"2","type":1,"version":1}`
	if r := in.do("POST", "/hooks/discord", ping, append(discordHeaders(pvDiscordKey, ping, now), "Content-Type: application/json")...); r.status != 200 || r.body != `{"type":1}` {
		t.Fatalf("discord PING: %d %s, want 200 {\"type\":1}", r.status, r.body)
	}
	bad := append(discordHeaders(pvDiscordKey, `{"type":1}`, now), "Content-Type: application/json")
	if r := in.do("POST", "/hooks/discord", ping, bad...); r.status != 401 {
		t.Fatalf("discord PING with a bad signature: %d %s, want 401", r.status, r.body)
	}

	zoom := `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
	r = in.do("POST", "/hooks/zoom", zoom, append(zoomHeaders(pvZoomSecret, zoom, now), "Content-Type: application/json")...)
	if want := `{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"` + zoomEncrypted(pvZoomSecret, "qgg8vlvZRS6UYooatFL8Aw") + `"}`; r.status != 200 || r.body != want {
		t.Fatalf("zoom url_validation: %d %s, want 200 %s", r.status, r.body, want)
	}
	if n := len(in.gw.Received()); n != 0 {
		t.Fatalf("the handshakes reached the gateway (%d requests)", n)
	}

	form := url.Values{"MessageSid": {"SM5b1e0f6c2d3a4b5c6d7e8f9a0b1c2d3e"}, "SmsStatus": {"received"}, "From": {"+15551234567"},
		"To": {"+15557654321"}, "Body": {"Is the build green?"}, "NumMedia": {"0"}}.Encode()
	r = in.do("POST", "/hooks/sms", form, twilioHeaders(pvTwilioSecret, in.base+"/hooks/sms", form)...)
	if r.status != 200 || r.header.Get("Content-Type") != "text/xml" || !strings.Contains(r.body, "<Response></Response>") {
		t.Fatalf("twilio SMS: %d %q (%s), want 200 empty TwiML\n%s", r.status, r.body, r.header.Get("Content-Type"), in.logs())
	}
	got := in.gw.Received()
	if len(got) != 1 {
		t.Fatalf("the gateway received %d requests, want the SMS", len(got))
	}
	msg, _ := got[0].Body["message"].(string)
	for _, want := range []string{"Is the build green?", "+15551234567", "Twilio message.received"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the agent's message %q lacks %q", msg, want)
		}
	}
	r = in.do("POST", "/hooks/sms", form, twilioHeaders(pvTwilioSecret, "https://elsewhere.example.com/hooks/sms", form)...)
	if r.status != 401 {
		t.Fatalf("twilio SMS signed for another URL: %d %s, want 401", r.status, r.body)
	}
	logs := in.logs()
	for _, s := range []string{pvMetaSecret, pvMetaToken, pvZoomSecret, pvTwilioSecret} {
		if strings.Contains(logs, s) {
			t.Errorf("the log holds a secret (%s…)", s[:10])
		}
	}
	if !strings.Contains(logs, "handshake refused") || !strings.Contains(logs, "bad signature") {
		t.Errorf("the refusals are not logged with their reasons")
	}
}

// TestIntegrationProviderBadInput (issue 29's acceptance): bad input
// fails provision or the request with a precise error, never a panic or
// a hang: a malformed public key, a JWKS file that does not parse, a
// require_token with a GET handshake, an unknown word are refused when
// the config loads, naming the mapping and the field; an SNS message
// whose certificate URL is outside the allow-list is refused (401, the
// reason logged) without any fetch; a form that does not parse is 401
// for Twilio, which signs the parsed fields.
func TestIntegrationProviderBadInput(t *testing.T) {
	setProviderEnv(t)
	in := startIngress(t, ingressOpts{hooks: providerHooks() + `
		mapping alarms {
			match_path alarms
			verify sns {
				topic arn:aws:sns:eu-west-1:123456789012:alarms
			}
		}`})
	dir := t.TempDir()
	badJWKS := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(badJWKS, []byte(`{"keys":[{"kty":"RSA","n":"not base64url!","e":"AQAB","kid":"k"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, mapping, want string
	}{
		{"malformed public key", `verify discord {
				public_key 00112233
			}`, "mapping bad: verify discord: public_keys[0]"},
		{"a public key that is not one", `verify sendgrid {
				public_key -----BEGIN PUBLIC KEY-----
			}`, "mapping bad: verify sendgrid: public_keys[0]"},
		{"JWKS file that does not parse", `verify pubsub {
				audience https://hooks.example.com/gcs
				service_account push@p.iam.gserviceaccount.com
				jwks ` + badJWKS + `
			}`, "mapping bad: verify pubsub: jwks"},
		{"JWKS file missing", `verify pubsub {
				audience https://hooks.example.com/gcs
				service_account push@p.iam.gserviceaccount.com
				jwks ` + filepath.Join(dir, "missing.json") + `
			}`, "mapping bad: verify pubsub: jwks"},
		{"JWKS URL off the allow-list", `verify pubsub {
				audience https://hooks.example.com/gcs
				service_account push@p.iam.gserviceaccount.com
				jwks https://keys.example.net/jwks.json
			}`, "mapping bad: verify pubsub: jwks"},
		{"require_token with a GET handshake", `require_token
			verify meta {
				secret {env.CH_IT_META_SECRET}
				verify_token {env.CH_IT_META_TOKEN}
			}`, "mapping bad: require_token: meta's GET handshake cannot carry the hook token"},
		{"a word the provider does not read", `verify github {
				secret {env.CH_IT_META_SECRET}
				verify_token {env.CH_IT_META_TOKEN}
			}`, "mapping bad: verify github: verify_token: not read by verify github (it reads: secret)"},
		{"a required word missing", `verify meta {
				secret {env.CH_IT_META_SECRET}
			}`, "mapping bad: verify meta: verify_token: required by verify meta"},
		{"topic that is not an ARN", `verify sns {
				topic alarms
			}`, "mapping bad: verify sns: topics[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cf := in.siteCaddyfile("", "http://"+in.hostPort(), providerHooks()+"\n\t\tmapping bad {\n\t\t\tmatch_path bad\n\t\t\t"+tc.mapping+"\n\t\t}")
			err := in.tryLoad(cf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// the running config is unchanged and serves
	ping := `{"id":"1","type":1}`
	if r := in.do("POST", "/hooks/discord", ping, append(discordHeaders(pvDiscordKey, ping, time.Now()), "Content-Type: application/json")...); r.status != 200 {
		t.Fatalf("after the refused loads: %d %s", r.status, r.body)
	}

	sns := `{"Type":"Notification","MessageId":"m-1","TopicArn":"arn:aws:sns:eu-west-1:123456789012:alarms","Message":"CPU high",` +
		`"Timestamp":"` + time.Now().UTC().Format(time.RFC3339) + `","SignatureVersion":"2","Signature":"c2lnbmF0dXJl",` +
		`"SigningCertURL":"https://sns.eu-west-1.amazonaws.com.evil.example/SimpleNotificationService-1.pem"}`
	start := time.Now()
	if r := in.do("POST", "/hooks/alarms", sns, "Content-Type: text/plain; charset=UTF-8", "X-Amz-Sns-Message-Type: Notification"); r.status != 401 {
		t.Fatalf("SNS with a certificate URL off the allow-list: %d %s, want 401", r.status, r.body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %v: a fetch was attempted", d)
	}
	testkit.WaitForState(t, func() string { return "the log names the refusal" }, func() bool {
		return strings.Contains(in.logs(), "certificate URL not allowed")
	})
	// a form Twilio signed cannot be told from a tampered one when it
	// does not parse
	if r := in.do("POST", "/hooks/sms", "Body=%zz", twilioHeaders(pvTwilioSecret, in.base+"/hooks/sms", "Body=x")...); r.status != 401 {
		t.Fatalf("a form that does not parse: %d %s, want 401", r.status, r.body)
	}
}

// TestIntegrationPublicURL: a provider that signs the URL (Twilio) is
// verified over the URL the sender called, reconstructed once
// (verify.PublicURL): the original request's path, before a rewrite in
// front of the handler, and the scheme and host a trusted proxy
// forwarded; from an untrusted peer the forwarded headers are ignored,
// and public_url names the origin when Caddy cannot see it.
func TestIntegrationPublicURL(t *testing.T) {
	setProviderEnv(t)
	in := startIngress(t, ingressOpts{noGW: true})
	in.startGateway()
	site := func(trusted, publicURL string) string {
		pub := ""
		if publicURL != "" {
			pub = "\n\t\t\t\tpublic_url " + publicURL
		}
		return `{
	admin off
	auto_https off
	persist_config off
	log {
		output file ` + in.logPath + `
		format json
		level DEBUG
	}
	servers {
		trusted_proxies static ` + trusted + `
		trusted_proxies_strict
	}
}
` + testSiteAddress + ` {
	bind 127.0.0.1
	rewrite /tw/sms /hooks/sms
	hooks {
		token ` + itHookToken + `
		gateway unix/` + in.sock + `
		gateway_token ` + itGatewayToken + `
		mapping sms {
			match_path sms
			verify twilio {
				secret {env.CH_IT_TWILIO_SECRET}` + pub + `
			}
		}
	}
}
`
	}
	form := url.Values{"MessageSid": {"SM1"}, "SmsStatus": {"received"}, "From": {"+15551234567"}, "Body": {"hi"}}.Encode()
	proxied := []string{"X-Forwarded-Proto: https", "X-Forwarded-Host: hooks.example.com"}
	for _, tc := range []struct {
		name, trusted, publicURL, signed string
		extra                            []string
		status                           int
	}{
		{"trusted proxy: its scheme and host, the path before the rewrite", "127.0.0.0/8", "", "https://hooks.example.com/tw/sms", proxied, 200},
		{"trusted proxy: not the rewritten path", "127.0.0.0/8", "", "https://hooks.example.com/hooks/sms", proxied, 401},
		{"untrusted peer: forwarded headers ignored", "192.0.2.0/24", "", "https://hooks.example.com/tw/sms", proxied, 401},
		{"untrusted peer: the URL Caddy served", "192.0.2.0/24", "", "@BASE@/tw/sms", proxied, 200},
		{"public_url", "192.0.2.0/24", "https://hooks.example.com", "https://hooks.example.com/tw/sms", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in.load(site(tc.trusted, tc.publicURL))
			signed := strings.Replace(tc.signed, "@BASE@", in.base, 1)
			r := in.do("POST", "/tw/sms", form, append(twilioHeaders(pvTwilioSecret, signed, form), tc.extra...)...)
			if r.status != tc.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.status)
			}
		})
	}
}

// TestIntegrationProviderEvents: a provider's event name reaches the
// handlers around the hooks handler as {http.hooks.event} (a deferred
// response header here: a signed request's access entry is the handler's
// own, redacted, which log_append cannot extend); a handshake is route
// challenge with its mapping, and the event log keeps it as a challenge
// (authenticated by the provider's handshake, nothing dispatched) beside
// the delivery.
func TestIntegrationProviderEvents(t *testing.T) {
	setProviderEnv(t)
	t.Setenv("CH_IT_SHOPIFY_SECRET", pvShopifySecret)
	hooks := providerHooks() + `
		mapping shop {
			match_path shop
			verify shopify {
				secret {env.CH_IT_SHOPIFY_SECRET}
			}
		}`
	in := startIngress(t, ingressOpts{hooks: hooks})
	in.load(strings.Replace(in.currentCaddyfile(t), "\thooks {", `	header >X-Hooks "{http.hooks.route} {http.hooks.mapping} {http.hooks.event}"
	hooks {
		`+hooks, 1))
	order := `{"id":1,"name":"#1001","email":"jon@example.com","total_price":"4.00","currency":"EUR"}`
	r := in.do("POST", "/hooks/shop", order, shopifyHeaders(pvShopifySecret, order, "orders/create", "wh-1")...)
	if r.status != 200 || r.header.Get("X-Hooks") != "shop shop orders/create" {
		t.Fatalf("shopify: %d %s (X-Hooks %q)", r.status, r.body, r.header.Get("X-Hooks"))
	}
	r = in.do("GET", "/hooks/whatsapp?hub.mode=subscribe&hub.challenge=7&hub.verify_token="+pvMetaToken, "")
	if r.status != 200 || r.header.Get("X-Hooks") != "challenge whatsapp" {
		t.Fatalf("meta handshake: %d %s (X-Hooks %q)", r.status, r.body, r.header.Get("X-Hooks"))
	}
	_, body := adminCall(t, "GET", "/hooks/events?path=/hooks", "")
	var page struct {
		Entries []eventlog.EventJSON `json:"entries"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatalf("events: %v\n%s", err, body)
	}
	got := map[string]string{}
	for _, e := range page.Entries {
		if e.Type == "event" {
			got[e.Hook] = e.Route + " " + e.Auth + " " + e.State
		}
	}
	if got["whatsapp"] != "challenge handshake meta challenge" || got["shop"] != "shop signature shopify sent" {
		t.Fatalf("event log rows %v", got)
	}
	if n := len(in.gw.Received()); n != 1 {
		t.Fatalf("the gateway received %d requests, want the order only", n)
	}
}
