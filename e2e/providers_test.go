//go:build openclaw

package e2e

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/testkit"
)

// Secrets of the providers e2e (literals in the edge's config: accepted
// with a warning).
const (
	provMetaSecret   = "e2e-meta-app-secret-3c5e7a9b1d0f"
	provMetaToken    = "e2e-meta-verify-token-8a6c4e2b0d"
	provTwilioSecret = "e2e-twilio-auth-token-5b7d9f1a3c"
)

// writeProvidersConfig writes testdata/providers/openclaw.json5 as g's
// config, its markers filled in.
func writeProvidersConfig(g *openclawGateway, stub *modelStub) error {
	src, err := os.ReadFile(filepath.Join("testdata", "providers", "openclaw.json5"))
	if err != nil {
		return err
	}
	return g.writeConfigFile([]byte(strings.NewReplacer(
		"__PORT__", strconv.Itoa(g.port), "__AUTH_TOKEN__", g.authToken, "__HOOKS_TOKEN__", g.hooksToken,
		"__MODEL_URL__", stub.baseURL(), "__LOG_FILE__", g.fileLogPath(),
	).Replace(string(src))))
}

// TestProviderForwarding (issue 29): signed providers through a
// forward-mode edge in front of the real gateway. Meta's GET handshake is
// answered by the edge (the challenge, text/plain) only with the right
// verify_token, and a signed WhatsApp message reaches the gateway's own
// mapping as sent; Twilio's form SMS, signed over the URL the edge
// served, reaches the gateway as the JSON object of its fields (the
// gateway takes JSON only), answered with empty TwiML; Discord's PING is
// answered {"type":1} (a bad one 401), and an application command is
// answered with the deferred response while the gateway runs it. The
// gateway's agent runs are read from its own log and the model stub's
// prompts; the handshakes start none.
func TestProviderForwarding(t *testing.T) {
	start := time.Now()
	inst := locateOpenclaw(t)
	stub := newModelStub(t)
	gw := newOpenclawGatewayWith(t, inst, func(g *openclawGateway) error { return writeProvidersConfig(g, stub) })
	bin := testkit.CaddyBinary(t)
	discordPub, discordKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	site := edgeSite{ln: listenLoopback(t), gateway: gw.addr(), extra: []string{"mode forward",
		"mapping whatsapp {\n\tmatch_path whatsapp\n\tforward\n\tverify meta {\n\t\tsecret " + provMetaSecret + "\n\t\tverify_token " + provMetaToken + "\n\t}\n}",
		"mapping sms {\n\tmatch_path sms\n\tforward\n\tverify twilio {\n\t\tsecret " + provTwilioSecret + "\n\t}\n}",
		"mapping discord {\n\tmatch_path discord\n\tforward\n\tverify discord {\n\t\tpublic_key " + hex.EncodeToString(discordPub) + "\n\t}\n}",
	}}
	cfg := edgeConfig{edgeToken: randomToken(t), gatewayToken: gw.hooksToken, sites: []edgeSite{site}}
	startEdge(t, bin, cfg)
	base := "http://" + site.addr() + "/hooks"
	edge := diffTarget{name: "edge", base: base, token: cfg.edgeToken}
	send := func(s diffSend, nonce string) sentReply {
		t.Helper()
		s.cred = credNone // the providers carry no hook token: their signatures authenticate them
		r := sendOne(t, edge, s, nonce)
		for try := 0; try < admissionRetries && notAdmitted(r); try++ {
			time.Sleep(time.Second)
			r = sendOne(t, edge, s, nonce)
		}
		return r
	}
	expect := func(what string, r sentReply, status int, body, contentType string) {
		t.Helper()
		if r.status != status || body != "" && string(r.body) != body || contentType != "" && !strings.HasPrefix(r.header.Get("Content-Type"), contentType) {
			t.Fatalf("%s: %d %q (%s), want %d %q (%s)", what, r.status, r.body, r.header.Get("Content-Type"), status, body, contentType)
		}
	}

	// Meta: the handshake, then a signed message
	hub := "/whatsapp?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token="
	expect("meta handshake", send(diffSend{method: "GET", sub: hub + provMetaToken, contentType: "-"}, ""), 200, "1158201444", "text/plain")
	expect("meta handshake, wrong verify_token", send(diffSend{method: "GET", sub: hub + "guess", contentType: "-"}, ""), 401, "", "")
	metaNonce := newNonce(t)
	meta := `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"messages":[{"from":"16315551181","id":"wamid.1","type":"text","text":{"body":"Is the build green? ` + metaNonce + `"}}]}}]}]}`
	mac := hmac.New(sha256.New, []byte(provMetaSecret))
	mac.Write([]byte(meta))
	r := send(diffSend{sub: "/whatsapp", body: meta, headers: map[string]string{"X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil))}}, metaNonce)
	expect("meta message", r, 200, "", "application/json")

	// Twilio: a form, signed over the URL the edge serves
	smsNonce := newNonce(t)
	form := url.Values{"MessageSid": {"SM" + smsNonce}, "SmsStatus": {"received"}, "From": {"+15551234567"}, "To": {"+15557654321"},
		"Body": {"Deploy status? " + smsNonce}}
	r = send(diffSend{sub: "/sms", body: form.Encode(), contentType: "application/x-www-form-urlencoded",
		headers: map[string]string{"X-Twilio-Signature": twilioSignature(provTwilioSecret, base+"/sms", form)}}, smsNonce)
	expect("twilio form", r, 200, `<?xml version="1.0" encoding="UTF-8"?><Response></Response>`, "text/xml")

	// Discord: PING, a PING badly signed, an application command
	discord := func(body, signed string) map[string]string {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		return map[string]string{"X-Signature-Timestamp": ts, "X-Signature-Ed25519": hex.EncodeToString(ed25519.Sign(discordKey, []byte(ts+signed)))}
	}
	ping := `{"id":"1","application_id":"2","type":1,"version":1}`
	expect("discord PING", send(diffSend{sub: "/discord", body: ping, headers: discord(ping, ping)}, ""), 200, `{"type":1}`, "application/json")
	expect("discord PING, bad signature", send(diffSend{sub: "/discord", body: ping, headers: discord(ping, "{}")}, ""), 401, "", "")
	cmdNonce := newNonce(t)
	cmd := `{"id":"3","type":2,"token":"aW50ZXJhY3Rpb24","data":{"name":"ask","options":[{"name":"q","value":"weather ` + cmdNonce + `"}]},"member":{"user":{"username":"ann"}}}`
	expect("discord command", send(diffSend{sub: "/discord", body: cmd, headers: discord(cmd, cmd)}, cmdNonce), 200, `{"type":5}`, "application/json")

	sends := []pathsSend{{name: "meta message", runs: 1}, {name: "twilio form", runs: 1}, {name: "discord command", runs: 1}}
	nonces := []string{metaNonce, smsNonce, cmdNonce}
	observed, prompts := settlePaths(t, gw, stub, "providers", sends, nonces)
	want := []string{
		"WhatsApp from 16315551181: Is the build green? " + metaNonce,
		"SMS from +15551234567 to +15557654321: Deploy status? " + smsNonce,
		"Discord /ask by ann: weather " + cmdNonce,
	}
	for i, s := range sends {
		if len(observed[i].Runs) != 1 || len(prompts[i]) != 1 || !strings.Contains(prompts[i][0], want[i]) {
			t.Errorf("%s: the gateway's agent got %q, want a run on %q", s.name, prompts[i], want[i])
		}
	}
	// the handshakes started nothing: every run the gateway logged is one
	// of the three messages
	runs, err := readHookRuns(gw.fileLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != len(sends) {
		var names []string
		for _, rec := range runs {
			names = append(names, rec.JobID)
		}
		slices.Sort(names)
		t.Errorf("the gateway ran %d hooks (%v), want the %d messages only", len(runs), names, len(sends))
	}
	t.Logf("providers through a forward-mode edge and the real gateway: %d runs, settled in %v", len(runs), time.Since(start).Round(time.Second))
}

// twilioSignature is Twilio's X-Twilio-Signature for a form posted to
// fullURL: HMAC-SHA1 of the URL and every field name and value, sorted
// by name, base64.
func twilioSignature(secret, fullURL string, form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(fullURL))
	for _, k := range keys {
		for _, v := range form[k] {
			mac.Write([]byte(k + v))
		}
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
