package verify

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

func TestGenericAlgorithmsAndEncodings(t *testing.T) {
	body := `{"event":"ping"}`
	for _, alg := range []string{"sha1", "sha256", "sha512"} {
		for _, enc := range []string{"hex", "base64"} {
			t.Run(alg+"/"+enc, func(t *testing.T) {
				encode := hex.EncodeToString
				wrong := base64.StdEncoding.EncodeToString
				if enc == "base64" {
					encode, wrong = wrong, encode
				}
				sum := mac(testHashes[alg], []byte(genericSecret), body)
				otherAlg := "sha256"
				if alg == "sha256" {
					otherAlg = "sha512"
				}
				v := mustNew(t, Config{Scheme: SchemeHMAC, Secrets: []string{genericSecret}, Header: "X-Signature", Prefix: alg + "=", Algorithm: alg, Encoding: enc})
				runCases(t, v, []reqCase{
					{name: "valid", h: hdr("X-Signature", alg+"="+encode(sum)), body: body},
					{name: "missing prefix", h: hdr("X-Signature", encode(sum)), body: body, wantReason: ReasonMalformedSignature},
					{name: "wrong encoding", h: hdr("X-Signature", alg+"="+wrong(sum)), body: body, wantReason: ReasonMalformedSignature},
					{name: "wrong algorithm", h: hdr("X-Signature", alg+"="+encode(mac(testHashes[otherAlg], []byte(genericSecret), body))), body: body, wantReason: ReasonMalformedSignature},
					{name: "wrong secret", h: hdr("X-Signature", alg+"="+encode(mac(testHashes[alg], []byte(otherSecret), body))), body: body, wantReason: ReasonBadSignature},
					{name: "tampered body", h: hdr("X-Signature", alg+"="+encode(sum)), body: body + "x", wantReason: ReasonBadSignature},
					{name: "missing header", h: hdr(), body: body, wantReason: ReasonMissingSignature, wantHeader: "X-Signature"},
				})
			})
		}
	}
}

func TestGenericLayout(t *testing.T) {
	body := `{"n":1}`
	now := ts(0)
	sig := func(parts ...string) string { return hexSHA256(genericSecret, parts...) }
	t.Run("default layout with unsigned id header", func(t *testing.T) {
		v := mustNew(t, Config{Scheme: SchemeHMAC, Secrets: []string{genericSecret}, Header: "x-sig", IDHeader: "x-delivery"})
		runCases(t, v, []reqCase{
			{name: "with id", h: hdr("X-Sig", sig(body), "X-Delivery", "d-1"), body: body, want: Result{DeliveryID: "d-1"}},
			{name: "without id", h: hdr("X-Sig", sig(body)), body: body},
			{name: "conflicting ids ignored", h: hdr("X-Sig", sig(body), "X-Delivery", "d-1", "X-Delivery", "d-2"), body: body},
		})
	})
	t.Run("timestamp.body", func(t *testing.T) {
		v := mustNew(t, Config{Scheme: SchemeHMAC, Secrets: []string{genericSecret}, Header: "X-Sig", TimestampHeader: "X-Ts", Layout: "{timestamp}.{body}", Tolerance: time.Minute})
		runCases(t, v, []reqCase{
			{name: "valid", h: hdr("X-Sig", sig(now, ".", body), "X-Ts", now), body: body},
			{name: "missing timestamp", h: hdr("X-Sig", sig(now, ".", body)), body: body, wantReason: ReasonMissingTimestamp, wantHeader: "X-Ts"},
			{name: "stale", h: hdr("X-Sig", sig(ts(-61*time.Second), ".", body), "X-Ts", ts(-61*time.Second)), body: body, wantReason: ReasonStaleTimestamp},
			{name: "future", h: hdr("X-Sig", sig(ts(61*time.Second), ".", body), "X-Ts", ts(61*time.Second)), body: body, wantReason: ReasonStaleTimestamp},
			{name: "layout ignored by sender", h: hdr("X-Sig", sig(body), "X-Ts", now), body: body, wantReason: ReasonBadSignature},
			{name: "other separator", h: hdr("X-Sig", sig(now, ":", body), "X-Ts", now), body: body, wantReason: ReasonBadSignature},
		})
	})
	t.Run("id, timestamp and literals", func(t *testing.T) {
		v := mustNew(t, Config{Scheme: SchemeHMAC, Secrets: []string{genericSecret}, Header: "X-Sig", Encoding: "base64",
			TimestampHeader: "X-Ts", IDHeader: "X-Id", Layout: "v2:{id}:{timestamp}:{body}!"})
		b64 := func(parts ...string) string {
			return base64.StdEncoding.EncodeToString(mac(testHashes["sha256"], []byte(genericSecret), parts...))
		}
		runCases(t, v, []reqCase{
			{name: "valid", h: hdr("X-Sig", b64("v2:", "id-9", ":", now, ":", body, "!"), "X-Ts", now, "X-Id", "id-9"), body: body, want: Result{DeliveryID: "id-9"}},
			{name: "id changed", h: hdr("X-Sig", b64("v2:", "id-9", ":", now, ":", body, "!"), "X-Ts", now, "X-Id", "id-8"), body: body, wantReason: ReasonBadSignature},
			{name: "missing id", h: hdr("X-Sig", b64("v2:", "id-9", ":", now, ":", body, "!"), "X-Ts", now), body: body, wantReason: ReasonMissingID, wantHeader: "X-Id"},
			{name: "literal missing", h: hdr("X-Sig", b64("id-9", ":", now, ":", body), "X-Ts", now, "X-Id", "id-9"), body: body, wantReason: ReasonBadSignature},
		})
	})
}

func TestParseLayout(t *testing.T) {
	tests := []struct {
		in      string
		want    string // segments rendered as literal text and {name}
		wantErr string
	}{
		{in: "{body}", want: "{body}"},
		{in: "{timestamp}.{body}", want: "{timestamp}|.|{body}"},
		{in: "v0:{timestamp}:{body}", want: "v0:|{timestamp}|:|{body}"},
		{in: "{id}.{timestamp}.{body}\n", want: "{id}|.|{timestamp}|.|{body}|\n"},
		{in: "", wantErr: "must contain {body}"},
		{in: "{timestamp}", wantErr: "must contain {body}"},
		{in: "{body}{body}", wantErr: "more than once"},
		{in: "{Body}", wantErr: "unknown placeholder {Body}"},
		{in: "{}", wantErr: "unknown placeholder {}"},
		{in: "{body", wantErr: `"{" without`},
		{in: "{bo{dy}", wantErr: `"{" without`},
		{in: "body}", wantErr: `"}" without`},
		{in: "{body}" + strings.Repeat("x", maxLayoutLen), wantErr: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			l, err := parseLayout(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseLayout(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := renderLayout(l); got != tt.want {
				t.Fatalf("parseLayout(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// renderLayout shows a parsed layout's segments separated by "|".
func renderLayout(l layout) string {
	var parts []string
	for _, s := range l.segs {
		switch s.kind {
		case segLiteral:
			parts = append(parts, string(s.literal))
		case segBody:
			parts = append(parts, "{body}")
		case segTimestamp:
			parts = append(parts, "{timestamp}")
		case segID:
			parts = append(parts, "{id}")
		}
	}
	return strings.Join(parts, "|")
}
