package verify

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

func TestParseUnix(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1700000000", 1700000000, true},
		{"0", 0, true},
		{"000000000001", 1, true},
		{"999999999999", 999999999999, true},
		{"1700000000000", 0, false}, // milliseconds: 13 digits
		{"", 0, false},
		{"+1700000000", 0, false},
		{"-1", 0, false},
		{"17e8", 0, false},
		{"1700000000.5", 0, false},
		{" 1700000000", 0, false},
		{"١٢٣", 0, false}, // non-ASCII digits
	}
	for _, tt := range tests {
		got, ok := parseUnix(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseUnix(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCandidatesAdd(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	b64 := base64.StdEncoding.EncodeToString(sum[:])
	// Same bytes, but the final character carries non-zero padding bits.
	noncanon := []byte(b64)
	noncanon[len(noncanon)-2]++
	tests := []struct {
		name string
		enc  encoding
		text string
		want string
	}{
		{"hex lower", encHex, strings.Repeat("ab", 32), ""},
		{"hex upper", encHex, strings.Repeat("AB", 32), ""},
		{"hex odd length", encHex, strings.Repeat("a", 63), ReasonMalformedSignature},
		{"hex empty", encHex, "", ReasonMalformedSignature},
		{"hex with space", encHex, strings.Repeat("ab", 31) + "a ", ReasonMalformedSignature},
		{"base64", encBase64, b64, ""},
		{"base64 non-canonical padding bits", encBase64, string(noncanon), ReasonMalformedSignature},
		{"base64 unpadded", encBase64, strings.TrimRight(b64, "="), ReasonMalformedSignature},
		{"base64 newline", encBase64, b64[:20] + "\n" + b64[21:], ReasonMalformedSignature},
		{"base64 sha512 length", encBase64, base64.StdEncoding.EncodeToString(make([]byte, 64)), ReasonMalformedSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c candidates
			if got := c.add(tt.enc, sha256.Size, tt.text); got != tt.want {
				t.Fatalf("add = %q, want %q", got, tt.want)
			}
			if wantN := map[bool]int{true: 1, false: 0}[tt.want == ""]; c.n != wantN {
				t.Fatalf("n = %d, want %d", c.n, wantN)
			}
		})
	}
	t.Run("decoded bytes", func(t *testing.T) {
		var c candidates
		c.add(encBase64, sha256.Size, b64)
		c.add(encHex, sha256.Size, strings.ToUpper(strings.Repeat("0f", 32)))
		if string(c.sig[0][:32]) != string(sum[:]) || c.sig[1][0] != 0x0f || c.sig[1][31] != 0x0f {
			t.Fatal("decoded signatures differ from their encodings")
		}
	})
	t.Run("cap", func(t *testing.T) {
		var c candidates
		for i := range MaxSignatures {
			if r := c.add(encHex, sha256.Size, strings.Repeat("00", 32)); r != "" {
				t.Fatalf("add %d: %s", i, r)
			}
		}
		if r := c.add(encHex, sha256.Size, strings.Repeat("00", 32)); r != ReasonTooManySignatures {
			t.Fatalf("add beyond cap = %q", r)
		}
	})
}
