package verify

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

func TestGitHub(t *testing.T) {
	body := `{"action":"opened","number":1}`
	good := "sha256=" + hexSHA256(githubSecret, body)
	delivery := "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	raw, _ := hex.DecodeString(strings.TrimPrefix(good, "sha256="))
	v := mustNew(t, Config{Scheme: SchemeGitHub, Secrets: []string{githubSecret}})
	runCases(t, v, []reqCase{
		{name: "valid", h: hdr("X-Hub-Signature-256", good, "X-GitHub-Delivery", delivery), body: body, want: Result{DeliveryID: delivery}},
		{name: "valid without delivery id", h: hdr("X-Hub-Signature-256", good), body: body},
		{name: "upper-case hex", h: hdr("X-Hub-Signature-256", "sha256="+strings.ToUpper(good[7:])), body: body},
		{name: "surrounding blanks", h: hdr("X-Hub-Signature-256", " \t"+good+" "), body: body},
		{name: "lower-case header name in map", h: hdr("x-hub-signature-256", good), body: body},
		{name: "identical duplicate headers", h: hdr("X-Hub-Signature-256", good, "X-Hub-Signature-256", good), body: body},
		{name: "missing header", h: hdr("X-GitHub-Delivery", delivery), body: body, wantReason: ReasonMissingSignature, wantHeader: "X-Hub-Signature-256"},
		{name: "blank header", h: hdr("X-Hub-Signature-256", "  "), body: body, wantReason: ReasonMissingSignature},
		{name: "legacy sha1 header only", h: hdr("X-Hub-Signature", "sha1=0000000000000000000000000000000000000000"), body: body, wantReason: ReasonMissingSignature},
		{name: "wrong secret", h: hdr("X-Hub-Signature-256", "sha256="+hexSHA256(otherSecret, body)), body: body, wantReason: ReasonBadSignature},
		{name: "tampered body", h: hdr("X-Hub-Signature-256", good), body: body + "\n", wantReason: ReasonBadSignature},
		{name: "empty body", h: hdr("X-Hub-Signature-256", good), body: "", wantReason: ReasonBadSignature},
		{name: "one hex digit off", h: hdr("X-Hub-Signature-256", flipHex(good)), body: body, wantReason: ReasonBadSignature},
		{name: "conflicting duplicate headers", h: hdr("X-Hub-Signature-256", good, "X-Hub-Signature-256", flipHex(good)), body: body, wantReason: ReasonDuplicateHeader},
		{name: "no prefix", h: hdr("X-Hub-Signature-256", good[7:]), body: body, wantReason: ReasonMalformedSignature},
		{name: "sha1 prefix", h: hdr("X-Hub-Signature-256", "sha1="+good[7:]), body: body, wantReason: ReasonMalformedSignature},
		{name: "upper-case prefix", h: hdr("X-Hub-Signature-256", "SHA256="+good[7:]), body: body, wantReason: ReasonMalformedSignature},
		{name: "truncated", h: hdr("X-Hub-Signature-256", good[:len(good)-1]), body: body, wantReason: ReasonMalformedSignature},
		{name: "too long", h: hdr("X-Hub-Signature-256", good+"00"), body: body, wantReason: ReasonMalformedSignature},
		{name: "non-hex digit", h: hdr("X-Hub-Signature-256", good[:len(good)-1]+"g"), body: body, wantReason: ReasonMalformedSignature},
		{name: "base64 instead of hex", h: hdr("X-Hub-Signature-256", "sha256="+base64.StdEncoding.EncodeToString(raw)), body: body, wantReason: ReasonMalformedSignature},
		{name: "two signatures in one value", h: hdr("X-Hub-Signature-256", good+","+good), body: body, wantReason: ReasonMalformedSignature},
		{name: "huge header", h: hdr("X-Hub-Signature-256", good+strings.Repeat(" x", 4096)), body: body, wantReason: ReasonMalformedSignature},
	})
}

func TestGitHubDeliveryID(t *testing.T) {
	body := "{}"
	sig := "sha256=" + hexSHA256(githubSecret, body)
	v := mustNew(t, Config{Scheme: SchemeGitHub, Secrets: []string{githubSecret}})
	tests := []struct {
		name   string
		values []string
		want   string
	}{
		{"absent", nil, ""},
		{"uuid", []string{"a1b2"}, "a1b2"},
		{"same twice", []string{"a1b2", "a1b2"}, "a1b2"},
		{"conflicting", []string{"a1b2", "c3d4"}, ""},
		{"control byte", []string{"a1\x01b2"}, ""},
		{"inner space", []string{"a1 b2"}, ""},
		{"non-ascii", []string{"a1é"}, ""},
		{"at limit", []string{strings.Repeat("x", MaxDeliveryIDLen)}, strings.Repeat("x", MaxDeliveryIDLen)},
		{"over limit", []string{strings.Repeat("x", MaxDeliveryIDLen+1)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hdr("X-Hub-Signature-256", sig)
			for _, d := range tt.values {
				h.Add("X-GitHub-Delivery", d)
			}
			got, err := v.Verify(h, []byte(body), testNow)
			if err != nil {
				t.Fatal(err)
			}
			if got.DeliveryID != tt.want {
				t.Fatalf("DeliveryID = %q, want %q", got.DeliveryID, tt.want)
			}
		})
	}
}

// TestRotation checks that every configured secret is tried, in any order.
func TestRotation(t *testing.T) {
	body := `{"zen":"Keep it logically awesome."}`
	secrets := []string{githubSecret, otherSecret, "third-rotation-secret-xyz"}
	v := mustNew(t, Config{Scheme: SchemeGitHub, Secrets: secrets})
	for i, s := range append(secrets, "not-a-configured-secret-123") {
		h := hdr("X-Hub-Signature-256", "sha256="+hexSHA256(s, body))
		_, err := v.Verify(h, []byte(body), testNow)
		if configured := i < len(secrets); configured != (err == nil) {
			t.Errorf("secret %d (configured %v): err = %v", i, configured, err)
		}
	}
}
