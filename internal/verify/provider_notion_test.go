package verify

import (
	"os"
	"path/filepath"
	"testing"
)

const (
	notionToken = "secret_tMrlL1qK5vuQAh1b6cZGhFChZTSYJlce98V0pYn7yBl"
	notionBody  = `{"id":"367cba44-b6f3-4c92-81e7-6a2e9659efd4","timestamp":"2024-12-05T23:55:34.285Z","type":"page.content_updated","entity":{"id":"153104cd-477e-809d-8dc4-ff2d96ae3090","type":"page"},"authors":[{"id":"c7c11cca-1d73-471d-9b6e-bdef51470190","type":"person"}]}`
)

var _ = providerTest("notion", providerTests{
	vectors: []vector{{
		name:   "page.content_updated",
		source: "computed from https://developers.notion.com/reference/webhooks#step-3-validating-event-payloads-recommended: sha256= hex HMAC-SHA256 of the body under the verification token",
		cfg:    Config{Scheme: "notion", Secrets: []string{notionToken}},
		req:    post(notionBody, "X-Notion-Signature", "sha256="+hexMAC(sha256H, notionToken, notionBody)),
		now:    testNow,
		want:   Result{DeliveryID: "367cba44-b6f3-4c92-81e7-6a2e9659efd4", Event: "page.content_updated"},
	}},
	handshakes: []handshakeCase{{
		name:   "verification token equal to the configured secret",
		source: "computed from https://developers.notion.com/reference/webhooks#step-2-verifying-the-subscription: Notion posts {\"verification_token\"} once",
		req:    post(`{"verification_token":"` + notionToken + `"}`),
		status: 200,
	}, {
		name:     "another verification token",
		req:      post(`{"verification_token":"secret_someoneelse0000000000000"}`),
		wantFail: ReasonBadHandshake,
	}},
})

// TestNotionSecretFile: the first verification POST writes secret_file
// (0600) and arms the verifier; a second, different token is refused; a
// new Verifier reads the file.
func TestNotionSecretFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notion.secret")
	cfg := Config{Scheme: "notion", SecretFile: path}
	v := mustNew(t, cfg)
	signed := post(notionBody, "X-Notion-Signature", "sha256="+hexMAC(sha256H, notionToken, notionBody))
	if _, err := v.VerifyRequest(signed(), testNow); err == nil {
		t.Fatal("verified before the handshake")
	}
	a, err := v.Handshake(post(`{"verification_token":"`+notionToken+`"}`)(), testNow)
	if err != nil || a == nil || a.Status != 200 {
		t.Fatalf("handshake: %+v, %v", a, err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v, %v", st, err)
	}
	if _, err := v.VerifyRequest(signed(), testNow); err != nil {
		t.Fatalf("after the handshake: %v", err)
	}
	if _, err := v.Handshake(post(`{"verification_token":"secret_someoneelse0000000000000"}`)(), testNow); err == nil {
		t.Fatal("a second token replaced the first")
	}
	if _, err := mustNew(t, cfg).VerifyRequest(signed(), testNow); err != nil {
		t.Fatalf("a new verifier did not read the file: %v", err)
	}
	if _, err := New(Config{Scheme: "notion", SecretFile: path, Secrets: []string{notionToken}}); err == nil {
		t.Fatal("secret and secret_file together accepted")
	}
	if _, err := New(Config{Scheme: "notion"}); err == nil {
		t.Fatal("neither secret nor secret_file accepted")
	}
}
