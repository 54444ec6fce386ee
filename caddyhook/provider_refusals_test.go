package caddyhook

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// refusalProvider is one provider of a scheme family as
// TestProviderRefusalsLockout sends it: its mapping, a body, and how it
// signs (wrong: with another secret or key than the mapping's; at: the
// time it signs, where it signs one).
type refusalProvider struct {
	family string
	id     string
	cfg    *verify.Config
	ct     string
	body   string
	// sign returns the request's body and headers ("Name: value").
	sign func(t *testing.T, body string, at time.Time, wrong bool) (string, []string)
	// tamper changes a signed body; nil: the scheme does not sign the
	// body (a token, a JWT), so a changed body is no refusal.
	tamper func(body string) string
	// signsTime: a stale time is refused.
	signsTime bool
	// unsigned is the request without its credentials: nil, the body
	// without the signature headers; else this body (SNS signs in it).
	unsigned func(t *testing.T) string
}

// TestProviderRefusalsLockout: for one provider of each scheme family,
// issue 29's refusals through the handler: a tampered body (where the
// scheme signs it), a wrong secret or key, a stale time (where one is
// signed) and the credentials left out are each 401 and counted by the
// lockout (auth_failures 1: the address is then locked, and a request
// without credentials from it is 429), while a valid delivery from the
// same locked address is still taken (a lock never blocks a valid
// provider signature). Nothing refused reaches the gateway.
func TestProviderRefusalsLockout(t *testing.T) {
	snsKey := pvGoogleKey() // any RSA key
	stub := newSNSStub(t, snsKey)
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, googleJWKS(t), 0o600); err != nil {
		t.Fatal(err)
	}
	_, otherEd, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherP256 := mustP256()
	const topic = "arn:aws:sns:eu-west-1:123456789012:alarms"
	const aud, account = "https://hooks.example.com/gcs", "push@p.iam.gserviceaccount.com"
	pick := func(wrong bool, right, other string) string {
		if wrong {
			return other
		}
		return right
	}
	flip := func(body string) string { return strings.Replace(body, "ann", "bob", 1) }
	providers := []refusalProvider{
		{family: "hmac", id: "shopify", cfg: &verify.Config{Scheme: "shopify", Secrets: []string{pvShopifySecret}},
			ct: "application/json", body: `{"id":1001,"name":"#1001","email":"ann@example.com","total_price":"12.00","currency":"EUR"}`,
			sign: func(_ *testing.T, body string, _ time.Time, wrong bool) (string, []string) {
				return body, shopifyHeaders(pick(wrong, pvShopifySecret, "another-shopify-secret-0a1b2c3d"), body, "orders/create", "wh-1")
			}, tamper: flip},
		{family: "standard", id: "clerk", cfg: &verify.Config{Scheme: "clerk", Secrets: []string{pvClerkSecret}},
			ct: "application/json", body: `{"type":"user.created","data":{"id":"user_1","email_addresses":[{"email_address":"ann@example.com"}]}}`,
			sign: func(_ *testing.T, body string, at time.Time, wrong bool) (string, []string) {
				key := pvClerkKey
				if wrong {
					key = []byte("another-clerk-key-5f7a9c1e3b")
				}
				return body, clerkHeaders(key, "msg_1", body, at)
			}, tamper: flip, signsTime: true},
		{family: "token", id: "gitlab", cfg: &verify.Config{Scheme: "gitlab", Secrets: []string{pvGitLabSecret}},
			ct: "application/json", body: `{"object_kind":"push","project":{"path_with_namespace":"g/app"},"user_username":"ann"}`,
			sign: func(_ *testing.T, body string, _ time.Time, wrong bool) (string, []string) {
				return body, gitlabHeaders(pick(wrong, pvGitLabSecret, "another-gitlab-token-9e8d7c6b5a4f"), "Push Hook")
			}},
		{family: "ed25519", id: "discord", cfg: &verify.Config{Scheme: "discord", PublicKeys: []string{pvDiscordPublicKey()}},
			ct: "application/json", body: `{"id":"9","type":2,"data":{"name":"ask","options":[{"name":"q","value":"x"}]},"member":{"user":{"username":"ann"}}}`,
			sign: func(_ *testing.T, body string, at time.Time, wrong bool) (string, []string) {
				key := pvDiscordKey
				if wrong {
					key = otherEd
				}
				return body, discordHeaders(key, body, at)
			}, tamper: flip, signsTime: true},
		{family: "ecdsa", id: "sendgrid", cfg: &verify.Config{Scheme: "sendgrid", PublicKeys: []string{pvSendGridPublicKey()}},
			ct: "application/json", body: `[{"email":"ann@example.com","event":"bounce","reason":"mailbox full","sg_event_id":"sg-1"}]`,
			sign: func(_ *testing.T, body string, at time.Time, wrong bool) (string, []string) {
				key := pvSendGridKey
				if wrong {
					key = otherP256
				}
				return body, sendgridHeaders(key, body, at)
			}, tamper: flip, signsTime: true},
		{family: "digest", id: "feishu", cfg: &verify.Config{Scheme: "feishu", VerifyToken: pvFeishuToken, EncryptKey: pvFeishuKey},
			ct: "application/json", body: `{"schema":"2.0","header":{"event_id":"ev-1","event_type":"im.message.receive_v1","token":"` + pvFeishuToken +
				`"},"event":{"sender":{"sender_id":{"open_id":"ou_ann"}},"message":{"content":"hi"}}}`,
			sign: func(_ *testing.T, plain string, at time.Time, wrong bool) (string, []string) {
				body := feishuBody(pvFeishuKey, plain)
				return body, feishuHeaders(pick(wrong, pvFeishuKey, "another-feishu-key-2b4d6f8a"), body, at)
			}, tamper: func(body string) string { return strings.Replace(body, `{"encrypt":"`, `{"encrypt":"AAAA`, 1) }, signsTime: true},
		{family: "jwt", id: "pubsub", cfg: &verify.Config{Scheme: "pubsub", Audience: aud, ServiceAccount: account, JWKS: jwks},
			ct: "application/json", body: `{"message":{"attributes":{"eventType":"OBJECT_FINALIZE"},"data":"e30=","messageId":"m-1"},"subscription":"projects/p/subscriptions/s"}`,
			sign: func(_ *testing.T, body string, at time.Time, wrong bool) (string, []string) {
				// a token for another service account: the key set is the
				// mapping's, the identity is not
				return body, pubsubHeaders(aud, pick(wrong, account, "intruder@p.iam.gserviceaccount.com"), at)
			}, signsTime: true},
		{family: "x509", id: "sns", cfg: &verify.Config{Scheme: "sns", Topics: []string{topic}},
			ct: "text/plain; charset=UTF-8", body: "CPU above 90% on web-1",
			sign: func(t *testing.T, msg string, at time.Time, wrong bool) (string, []string) {
				key := snsKey
				if wrong {
					key = rtGoogleKeyB()
				}
				return snsMessage(t, key, "Notification", topic, msg, at), nil
			}, tamper: func(body string) string { return strings.Replace(body, "web-1", "web-2", 1) }, signsTime: true,
			unsigned: func(t *testing.T) string {
				m := snsMessage(t, snsKey, "Notification", topic, "x", time.Now())
				i := strings.Index(m, `"Signature":"`)
				j := strings.Index(m[i+len(`"Signature":"`):], `"`)
				return m[:i] + `"Signature":""` + m[i+len(`"Signature":"`)+j+1:]
			}},
	}
	gw := startTestGateway(t, devgw.Config{Record: true})
	var mappings []Mapping
	for _, p := range providers {
		mappings = append(mappings, Mapping{ID: p.id, MatchPath: p.id, Verify: p.cfg})
	}
	h := newTestHandler(t, gw, func(h *Handler) {
		h.verifyEnv = verify.Env{HTTPClient: &http.Client{Transport: stub}}
		h.AuthFailures = &AuthFailures{Count: 1}
		h.Mappings = mappings
	})
	families := map[string]bool{}
	addr := 0
	for _, p := range providers {
		families[p.family] = true
		send := func(body string, hdr []string, remote string) int {
			w := serve(t, h, hookRequest{target: "/hooks/" + p.id, body: body, remote: remote,
				header: headers([]string{"Content-Type", p.ct}, headerPairs(hdr...))})
			return w.Code
		}
		now := time.Now()
		type refusal struct {
			name string
			body string
			hdr  []string
		}
		var refusals []refusal
		if p.tamper != nil {
			body, hdr := p.sign(t, p.body, now, false)
			refusals = append(refusals, refusal{"tampered body", p.tamper(body), hdr})
		}
		body, hdr := p.sign(t, p.body, now, true)
		refusals = append(refusals, refusal{"wrong secret or key", body, hdr})
		if p.signsTime {
			body, hdr := p.sign(t, p.body, now.Add(-3*time.Hour), false)
			refusals = append(refusals, refusal{"stale time", body, hdr})
		}
		unsigned, _ := p.sign(t, p.body, now, false)
		if p.unsigned != nil {
			unsigned = p.unsigned(t)
		}
		refusals = append(refusals, refusal{"credentials missing", unsigned, nil})
		for _, rf := range refusals {
			t.Run(p.family+"/"+p.id+"/"+rf.name, func(t *testing.T) {
				addr++
				remote := fmt.Sprintf("198.51.100.%d", addr)
				before := counterValue(t, h.metrics.authFailures)
				if got := send(rf.body, rf.hdr, remote); got != http.StatusUnauthorized {
					t.Fatalf("status %d, want 401", got)
				}
				if got := counterValue(t, h.metrics.authFailures) - before; got != 1 {
					t.Fatalf("auth failures counted %v, want 1", got)
				}
				// counted by the lockout: the address is locked
				if got := send(unsigned, nil, remote); got != http.StatusTooManyRequests {
					t.Fatalf("then without credentials: %d, want 429 (locked)", got)
				}
				// a valid delivery is still checked and taken
				body, hdr := p.sign(t, p.body, time.Now(), false)
				if got := send(body, hdr, remote); got != http.StatusOK {
					t.Fatalf("then a valid delivery: %d, want 200", got)
				}
			})
		}
	}
	if len(families) != 8 {
		t.Fatalf("%d families, want the registry's 8", len(families))
	}
	for _, f := range []verify.Family{verify.FamilyHMAC, verify.FamilyStandard, verify.FamilyToken, verify.FamilyEd25519,
		verify.FamilyECDSA, verify.FamilyDigest, verify.FamilyJWT, verify.FamilyX509} {
		if !families[string(f)] {
			t.Errorf("family %s has no provider in the test", f)
		}
	}
	// only the valid deliveries were dispatched
	for _, rq := range gw.Received() {
		if b, _ := json.Marshal(rq.Body); strings.Contains(string(b), "bob") || strings.Contains(string(b), "web-2") {
			t.Errorf("a refused request reached the gateway: %s", b)
		}
	}
}
