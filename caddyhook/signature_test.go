package caddyhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"hash"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// Provider secrets of the signature tests. The log and adapt checks look
// for them, so each is distinctive.
const (
	sigGitHubSecret = "gh-secret-3b9f1d7c5a2e4f60aa"
	sigStripeSecret = "whsec_stripe7c1d9e3f5a2b4c6d8e"
	sigSlackSecret  = "slack-signing-8e2f4a6c1b3d5f70"
	sigHMACSecret   = "hmac-generic-5d7f9b1c3e2a4c6e80"
)

// sigStandardKey is the Standard Webhooks key; sigStandardSecret is how
// the provider shows it (whsec_<base64 key>).
var (
	sigStandardKey    = []byte("std-key-0f1e2d3c4b5a69788796a5b4")
	sigStandardSecret = "whsec_" + base64.StdEncoding.EncodeToString(sigStandardKey)
)

// macOf is the HMAC under newHash and key of the concatenated parts,
// computed here with crypto/hmac, independently of package verify.
func macOf(newHash func() hash.Hash, key []byte, parts ...string) []byte {
	m := hmac.New(newHash, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// unixString formats t as unix seconds.
func unixString(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// githubHeaders signs body as GitHub does ("Name: value" pairs);
// delivery, when set, is sent as X-GitHub-Delivery.
func githubHeaders(secret, body, delivery string) []string {
	h := []string{"X-Hub-Signature-256: sha256=" + hex.EncodeToString(macOf(sha256.New, []byte(secret), body)),
		"X-GitHub-Event: pull_request"}
	if delivery != "" {
		h = append(h, "X-GitHub-Delivery: "+delivery)
	}
	return h
}

// stripeHeaders signs body as Stripe does at time at.
func stripeHeaders(secret, body string, at time.Time) []string {
	ts := unixString(at)
	return []string{"Stripe-Signature: t=" + ts + ",v1=" + hex.EncodeToString(macOf(sha256.New, []byte(secret), ts, ".", body))}
}

// slackHeaders signs body as Slack does at time at.
func slackHeaders(secret, body string, at time.Time) []string {
	ts := unixString(at)
	return []string{"X-Slack-Request-Timestamp: " + ts,
		"X-Slack-Signature: v0=" + hex.EncodeToString(macOf(sha256.New, []byte(secret), "v0:", ts, ":", body))}
}

// standardHeadersFor signs body as a Standard Webhooks sender does, with
// delivery id id at time at.
func standardHeadersFor(key []byte, id, body string, at time.Time) []string {
	ts := unixString(at)
	return []string{"Webhook-Id: " + id, "Webhook-Timestamp: " + ts,
		"Webhook-Signature: v1," + base64.StdEncoding.EncodeToString(macOf(sha256.New, key, id, ".", ts, ".", body))}
}

// hmacHeaders signs body for sigHMACConfig: sha512, base64, prefix
// "sha512=", over "<timestamp>.<id>.<body>".
func hmacHeaders(secret, id, body string, at time.Time) []string {
	ts := unixString(at)
	return []string{"X-Delivery: " + id, "X-Timestamp: " + ts,
		"X-Signature: sha512=" + base64.StdEncoding.EncodeToString(macOf(sha512.New, []byte(secret), ts, ".", id, ".", body))}
}

// sigHMACConfig is the generic scheme hmacHeaders signs for.
func sigHMACConfig(secret string) *verify.Config {
	return &verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{secret}, Header: "X-Signature", Prefix: "sha512=",
		Algorithm: "sha512", Encoding: "base64", TimestampHeader: "X-Timestamp", Layout: "{timestamp}.{id}.{body}", IDHeader: "X-Delivery"}
}

// headerPairs turns "Name: value" strings into the flat pairs serve takes.
func headerPairs(hs ...string) []string {
	out := make([]string, 0, 2*len(hs))
	for _, h := range hs {
		k, v, _ := strings.Cut(h, ":")
		out = append(out, strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return out
}

// signedMapping is an agent mapping on path that verifies cfg.
func signedMapping(id, path, message string, cfg *verify.Config) Mapping {
	return Mapping{ID: id, MatchPath: path, MessageTemplate: message, Verify: cfg}
}

// githubConfig is a github verify block with secret.
func githubConfig(secret string) *verify.Config {
	return &verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{secret}}
}

// lastMessage is the message of the last action the gateway received.
func lastMessage(t *testing.T, gw *testGateway) string {
	t.Helper()
	got := gw.Received()
	if len(got) == 0 {
		t.Fatal("gateway received nothing")
	}
	m, _ := got[len(got)-1].Body["message"].(string)
	return m
}

// TestSignatureAuthMatrix checks which credential a mapping accepts: its
// signature without the token; both with require_token; the token only
// without verify; never a signature on wake/agent. A bad signature is
// not rescued by the token on a signing mapping, but a token-only mapping
// on the same path still answers a request that carries the token.
func TestSignatureAuthMatrix(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) {
		strict := signedMapping("strict", "strict", "strict {{payload.n}}", githubConfig(sigGitHubSecret))
		strict.RequireToken = true
		h.Mappings = []Mapping{
			signedMapping("gh", "github", "signed {{payload.n}}", githubConfig(sigGitHubSecret)),
			strict,
			signedMapping("mixed-signed", "mixed", "mixed-signed {{payload.n}}", githubConfig(sigGitHubSecret)),
			{ID: "mixed-token", MatchPath: "mixed", MessageTemplate: "mixed-token {{payload.n}}"},
			{ID: "plain", MatchPath: "plain", MessageTemplate: "plain {{payload.n}}"},
		}
	})
	const body = `{"n":"7","text":"t","message":"m"}`
	good := headerPairs(githubHeaders(sigGitHubSecret, body, "")...)
	bad := headerPairs(githubHeaders("another-secret-of-16+bytes", body, "")...)
	tampered := headerPairs(githubHeaders(sigGitHubSecret, body+" ", "")...)
	for _, tc := range []struct {
		name   string
		path   string
		token  bool
		sig    []string
		status int
		want   string // message prefix at the gateway for a 200
	}{
		{"signature only", "github", false, good, 200, "signed 7"},
		{"signature and token", "github", true, good, 200, "signed 7"},
		{"token only on signing path", "github", true, nil, 401, ""},
		{"wrong secret", "github", false, bad, 401, ""},
		{"wrong secret with token", "github", true, bad, 401, ""},
		{"tampered body", "github", false, tampered, 401, ""},
		{"nothing", "github", false, nil, 401, ""},
		{"require_token: signature only", "strict", false, good, 401, ""},
		{"require_token: token only", "strict", true, nil, 401, ""},
		{"require_token: bad signature and token", "strict", true, bad, 401, ""},
		{"require_token: both", "strict", true, good, 200, "strict 7"},
		{"mixed: signature picks the signing mapping", "mixed", false, good, 200, "mixed-signed 7"},
		{"mixed: token picks the token mapping", "mixed", true, nil, 200, "mixed-token 7"},
		{"mixed: both, first eligible wins", "mixed", true, good, 200, "mixed-signed 7"},
		{"mixed: bad signature with token", "mixed", true, bad, 200, "mixed-token 7"},
		{"mixed: bad signature alone", "mixed", false, bad, 401, ""},
		{"token path with signature only", "plain", false, good, 401, ""},
		{"wake with signature only", "wake", false, good, 401, ""},
		{"agent with signature only", "agent", false, good, 401, ""},
		{"wake with token and signature", "wake", true, good, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(gw.Received())
			hdr := headers(jsonCT, tc.sig)
			if tc.token {
				hdr = append(hdr, auth...)
			}
			w := serve(t, h, hookRequest{target: "/hooks/" + tc.path, body: body, header: hdr, remote: "192.0.2.50"})
			if w.Code != tc.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.status)
			}
			dispatched := len(gw.Received()) - before
			if tc.status != 200 {
				if dispatched != 0 {
					t.Fatalf("a %d request dispatched %d actions", tc.status, dispatched)
				}
				return
			}
			if dispatched != 1 {
				t.Fatalf("dispatched %d actions, want 1", dispatched)
			}
			if tc.want != "" && !strings.Contains(lastMessage(t, gw), tc.want) {
				t.Fatalf("message %q does not contain %q", lastMessage(t, gw), tc.want)
			}
		})
		// keep the shared address below the lockout threshold
		h.lockout.Reset(netip.MustParseAddr("192.0.2.50"))
	}
}

// TestSignatureDeliveryIDIsIdempotencyKey sends each provider's
// redelivery (re-signed later where the scheme signs a timestamp): it is
// answered with the first reply and dispatched once; another delivery id
// dispatches again; an explicit Idempotency-Key takes precedence over the
// delivery id.
func TestSignatureDeliveryIDIsIdempotencyKey(t *testing.T) {
	now := time.Now()
	type delivery func(id string, at time.Time) (body string, hdr []string)
	for _, tc := range []struct {
		name string
		cfg  *verify.Config
		send delivery
	}{
		{"github X-GitHub-Delivery", githubConfig(sigGitHubSecret), func(id string, _ time.Time) (string, []string) {
			const body = `{"action":"opened","number":1}`
			return body, githubHeaders(sigGitHubSecret, body, id)
		}},
		{"stripe event id", &verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{sigStripeSecret}}, func(id string, at time.Time) (string, []string) {
			body := `{"id":"` + id + `","type":"invoice.paid","number":1}`
			return body, stripeHeaders(sigStripeSecret, body, at)
		}},
		{"slack event_id across X-Slack-Retry-Num", &verify.Config{Scheme: verify.SchemeSlack, Secrets: []string{sigSlackSecret}}, func(id string, at time.Time) (string, []string) {
			body := `{"type":"event_callback","event_id":"` + id + `","number":1}`
			hdr := slackHeaders(sigSlackSecret, body, at)
			if at.After(now) {
				hdr = append(hdr, "X-Slack-Retry-Num: 1", "X-Slack-Retry-Reason: http_timeout")
			}
			return body, hdr
		}},
		{"standard webhook-id", &verify.Config{Scheme: verify.SchemeStandard, Secrets: []string{sigStandardSecret}}, func(id string, at time.Time) (string, []string) {
			const body = `{"type":"user.created","number":1}`
			return body, standardHeadersFor(sigStandardKey, id, body, at)
		}},
		{"hmac id_header", sigHMACConfig(sigHMACSecret), func(id string, at time.Time) (string, []string) {
			const body = `{"type":"thing","number":1}`
			return body, hmacHeaders(sigHMACSecret, id, body, at)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := startTestGateway(t, devgw.Config{Record: true})
			h := newTestHandler(t, gw, func(h *Handler) {
				h.Mappings = []Mapping{signedMapping("m", "p", "event {{payload.number}}", tc.cfg)}
			})
			send := func(id string, at time.Time, extra ...string) string {
				t.Helper()
				body, hdr := tc.send(id, at)
				w := serve(t, h, hookRequest{target: "/hooks/p", body: body, header: headers(jsonCT, headerPairs(hdr...), extra)})
				if w.Code != 200 {
					t.Fatalf("delivery %s: %d %s", id, w.Code, w.Body)
				}
				return w.Body.String()
			}
			first := send("evt_001", now)
			if again := send("evt_001", now.Add(30*time.Second)); again != first {
				t.Fatalf("redelivery answered %s, first %s", again, first)
			}
			if n := len(gw.Received()); n != 1 {
				t.Fatalf("redelivery dispatched: gateway saw %d requests, want 1", n)
			}
			if other := send("evt_002", now); other == first && strings.Contains(first, "runId") {
				t.Fatalf("another delivery id got the first reply %s", other)
			}
			if n := len(gw.Received()); n != 2 {
				t.Fatalf("another delivery id: gateway saw %d requests, want 2", n)
			}
			send("evt_003", now, "Idempotency-Key", "explicit-a")
			send("evt_003", now, "Idempotency-Key", "explicit-b")
			if n := len(gw.Received()); n != 4 {
				t.Fatalf("explicit Idempotency-Key did not take precedence: gateway saw %d requests, want 4", n)
			}
		})
	}
}

// TestSlackURLVerification answers a signed url_verification with its
// challenge, dispatching nothing; unsigned, badly signed or (with
// require_token) token-less challenges are refused.
func TestSlackURLVerification(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	slack := &verify.Config{Scheme: verify.SchemeSlack, Secrets: []string{sigSlackSecret}}
	h := newTestHandler(t, gw, func(h *Handler) {
		strict := signedMapping("slack-strict", "slack-strict", "{{payload.event.text}}", slack)
		strict.RequireToken = true
		h.Mappings = []Mapping{signedMapping("slack", "slack", "{{payload.event.text}}", slack), strict}
	})
	const challenge = `3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P`
	body := `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"` + challenge + `","type":"url_verification"}`
	now := time.Now()
	for _, tc := range []struct {
		name   string
		path   string
		hdr    []string
		status int
	}{
		{"signed", "slack", slackHeaders(sigSlackSecret, body, now), 200},
		{"signed with token", "slack", append(slackHeaders(sigSlackSecret, body, now), "Authorization: Bearer "+utHookToken), 200},
		{"unsigned with token", "slack", []string{"Authorization: Bearer " + utHookToken}, 401},
		{"bad signature", "slack", slackHeaders("not-the-slack-secret-1234", body, now), 401},
		{"stale", "slack", slackHeaders(sigSlackSecret, body, now.Add(-6*time.Minute)), 401},
		{"require_token: signed without token", "slack-strict", slackHeaders(sigSlackSecret, body, now), 401},
		{"require_token: signed with token", "slack-strict", append(slackHeaders(sigSlackSecret, body, now), "Authorization: Bearer "+utHookToken), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(t, h, hookRequest{target: "/hooks/" + tc.path, body: body, header: headers(jsonCT, headerPairs(tc.hdr...))})
			if w.Code != tc.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tc.status)
			}
			if tc.status == 200 {
				var got map[string]any
				if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || len(got) != 1 || got["challenge"] != challenge {
					t.Fatalf("reply %s, want {\"challenge\":%q}", w.Body, challenge)
				}
			}
		})
	}
	if n := len(gw.Received()); n != 0 {
		t.Fatalf("url_verification dispatched %d actions", n)
	}
}

// TestSignatureFailureReasons checks that a failed signature is a 401
// counted as an auth failure, whose (logged) reason names the header and
// the failure only.
func TestSignatureFailureReasons(t *testing.T) {
	h := newTestHandler(t, nil, func(h *Handler) {
		h.Mappings = []Mapping{signedMapping("gh", "github", "x", githubConfig(sigGitHubSecret))}
	})
	const body = `{"a":1}`
	for _, tc := range []struct {
		name string
		hdr  []string
		want string
	}{
		{"missing", nil, verify.ReasonMissingSignature},
		{"bad", githubHeaders("wrong-secret-wrong-secret", body, ""), verify.ReasonBadSignature},
		{"malformed", []string{"X-Hub-Signature-256: sha256=zz"}, verify.ReasonMalformedSignature},
		{"conflicting duplicates", []string{"X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64), githubHeaders(sigGitHubSecret, body, "")[0]}, verify.ReasonDuplicateHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/hooks/github", strings.NewReader(body))
			for i, hv := 0, headerPairs(tc.hdr...); i+1 < len(hv); i += 2 {
				r.Header.Add(hv[i], hv[i+1])
			}
			ex := exchange{r: r, sub: "github", now: time.Now(), body: []byte(body), ip: netip.MustParseAddr("192.0.2.77")}
			before := counterValue(t, h.metrics.authFailures)
			herr := h.lockout.count(&ex, h.router.verifySignature(&ex))
			if herr == nil || herr.status != http.StatusUnauthorized {
				t.Fatalf("verifySignature = %v, want 401", herr)
			}
			if !strings.Contains(herr.reason, tc.want) || strings.Contains(herr.reason, sigGitHubSecret) {
				t.Fatalf("reason %q, want it to contain %q and no secret", herr.reason, tc.want)
			}
			if after := counterValue(t, h.metrics.authFailures); after != before+1 {
				t.Fatalf("auth failures %v → %v, want one more", before, after)
			}
		})
	}
}

// counterValue reads a Prometheus counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestSignatureProvision: JSON accepts literal secrets; invalid verify
// blocks fail provision naming the mapping and never the secret; an unset
// placeholder is an error, not an empty secret.
func TestSignatureProvision(t *testing.T) {
	const literal = "literal-secret-in-json-config-0042"
	for _, tc := range []struct {
		name string
		cfg  verify.Config
		env  map[string]string
		want string // "" = provisions
	}{
		{name: "literal secret", cfg: verify.Config{Scheme: "github", Secrets: []string{literal}}},
		{name: "env placeholder", cfg: verify.Config{Scheme: "github", Secrets: []string{"{env.CH_UT_SIG_SECRET}"}},
			env: map[string]string{"CH_UT_SIG_SECRET": literal}},
		{name: "unset placeholder", cfg: verify.Config{Scheme: "github", Secrets: []string{"{env.CH_UT_SIG_UNSET}"}},
			want: "verify secret 1: {env.CH_UT_SIG_UNSET} is empty: CH_UT_SIG_UNSET is not set"},
		{name: "short secret", cfg: verify.Config{Scheme: "stripe", Secrets: []string{literal[:10]}}, want: "secrets[0]"},
		{name: "second secret short", cfg: verify.Config{Scheme: "slack", Secrets: []string{literal, literal[:12]}}, want: "secrets[1]"},
		{name: "no secret", cfg: verify.Config{Scheme: "github"}, want: "secrets"},
		{name: "unknown scheme", cfg: verify.Config{Scheme: "gitlub", Secrets: []string{literal}}, want: "gitlub"},
		{name: "standard without whsec", cfg: verify.Config{Scheme: "standard", Secrets: []string{literal}}, want: "secrets[0]"},
		{name: "hmac without header", cfg: verify.Config{Scheme: "hmac", Secrets: []string{literal}}, want: "header"},
		{name: "github with tolerance", cfg: verify.Config{Scheme: "github", Secrets: []string{literal}, Tolerance: time.Minute}, want: "tolerance"},
		{name: "generic field on stripe", cfg: verify.Config{Scheme: "stripe", Secrets: []string{literal}, Header: "X-Sig"}, want: "header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg := tc.cfg
			h := validHandler()
			h.Mappings = []Mapping{{ID: "signed", MatchPath: "p", MessageTemplate: "m", Verify: &cfg}}
			err := provision(t, h)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Provision: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "mapping signed") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Provision = %v, want an error naming mapping signed and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), literal[:10]) {
				t.Fatalf("error %q shows the secret", err)
			}
		})
	}
	h := validHandler()
	h.Mappings = []Mapping{{ID: "plain", MatchPath: "p", MessageTemplate: "m", RequireToken: true}}
	if err := provision(t, h); err == nil || !strings.Contains(err.Error(), "mapping plain: require_token") {
		t.Fatalf("require_token without verify: %v", err)
	}
}

// TestSignatureAnyPath: a signing mapping without match_path answers any
// custom hook name, but wake and agent still refuse a signature.
func TestSignatureAnyPath(t *testing.T) {
	gw := startTestGateway(t, devgw.Config{Record: true})
	h := newTestHandler(t, gw, func(h *Handler) {
		h.Mappings = []Mapping{signedMapping("any", "", "any {{path}}", githubConfig(sigGitHubSecret))}
	})
	const body = `{"text":"t","message":"m"}`
	sig := headerPairs(githubHeaders(sigGitHubSecret, body, "")...)
	for path, want := range map[string]int{"whatever": 200, "nested-name": 200, "wake": 401, "agent": 401} {
		if w := serve(t, h, hookRequest{target: "/hooks/" + path, body: body, header: headers(jsonCT, sig)}); w.Code != want {
			t.Errorf("%s: %d %s, want %d", path, w.Code, w.Body, want)
		}
	}
	if n := len(gw.Received()); n != 2 {
		t.Fatalf("gateway saw %d actions, want 2", n)
	}
}

// TestVerifierOffered: a request without its scheme's signature header is
// refused from the headers alone, with the reason Verify would give.
func TestVerifierOffered(t *testing.T) {
	for _, tc := range []struct {
		cfg    verify.Config
		hdr    http.Header
		offers bool
	}{
		{*githubConfig(sigGitHubSecret), http.Header{"X-Hub-Signature-256": {"sha256=00"}}, true},
		{*githubConfig(sigGitHubSecret), http.Header{"X-Hub-Signature": {"sha1=00"}}, false},
		{*githubConfig(sigGitHubSecret), http.Header{"X-Hub-Signature-256": {"  "}}, false},
		{*githubConfig(sigGitHubSecret), http.Header{}, false},
		{verify.Config{Scheme: "stripe", Secrets: []string{sigStripeSecret}}, http.Header{"Stripe-Signature": {"t=1,v1=00"}}, true},
		{verify.Config{Scheme: "standard", Secrets: []string{sigStandardSecret}}, http.Header{"Svix-Signature": {"v1,AA=="}}, true},
		{verify.Config{Scheme: "hmac", Secrets: []string{sigHMACSecret}, Header: "x-acme-signature"}, http.Header{"X-Acme-Signature": {"00"}}, true},
	} {
		v, err := verify.New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = v.Offered(tc.hdr)
		if (err == nil) != tc.offers {
			t.Errorf("%s %v: Offered = %v, want offered %v", tc.cfg.Scheme, tc.hdr, err, tc.offers)
		}
		if _, verr := v.Verify(tc.hdr, nil, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)); err != nil && (verr == nil || verr.Error() != err.Error()) {
			t.Errorf("%s %v: Offered says %v, Verify %v", tc.cfg.Scheme, tc.hdr, err, verr)
		}
	}
}
