package caddyhook

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// tokenAlphabet is what the property test's tokens are made of: the
// characters of hex, base64, base64url and the usual separators.
const tokenAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_."

// textAlphabet is what surrounds them: JSON, URL and header text.
const textAlphabet = `abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ0123456789{}[]":,/?&=%\-_.+~;`

// randomTokens are n random tokens of 32 to 96 characters.
func randomTokens(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 32+rng.IntN(65))
		for j := range b {
			b[j] = tokenAlphabet[rng.IntN(len(tokenAlphabet))]
		}
		out[i] = string(b)
	}
	return out
}

// randomText is n characters of textAlphabet.
func randomText(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = textAlphabet[rng.IntN(len(textAlphabet))]
	}
	return string(b)
}

// tokenShape is one way a token reaches recorded text (issue 34 B6).
type tokenShape struct {
	name string
	make func(rng *rand.Rand, tok string) string
}

// percentSome percent-encodes each byte of s with probability p.
func percentSome(rng *rand.Rand, s string, p float64) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if rng.Float64() < p {
			if rng.IntN(2) == 0 {
				fmt.Fprintf(&b, "%%%02X", s[i])
			} else {
				fmt.Fprintf(&b, "%%%02x", s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// splitAt is a point of tok that leaves at least redactMin characters on
// both sides.
func splitAt(rng *rand.Rand, tok string) int {
	return redactMin + rng.IntN(len(tok)-2*redactMin+1)
}

var tokenShapesCases = []tokenShape{
	{"whole", func(_ *rand.Rand, tok string) string { return tok }},
	{"a prefix", func(rng *rand.Rand, tok string) string { return tok[:redactMin+rng.IntN(len(tok)-redactMin)] }},
	{"a suffix", func(rng *rand.Rand, tok string) string { return tok[rng.IntN(len(tok)-redactMin+1):] }},
	{"a middle piece", func(rng *rand.Rand, tok string) string {
		i := rng.IntN(len(tok) - redactMin + 1)
		return tok[i : i+redactMin+rng.IntN(len(tok)-i-redactMin+1)]
	}},
	{"percent-encoded", func(rng *rand.Rand, tok string) string { return percentSome(rng, tok, 1) }},
	{"partly percent-encoded", func(rng *rand.Rand, tok string) string { return percentSome(rng, tok, 0.3) }},
	{"percent-encoded twice", func(rng *rand.Rand, tok string) string {
		return strings.ReplaceAll(percentSome(rng, tok, 0.5), "%", "%25")
	}},
	{"path-escaped", func(_ *rand.Rand, tok string) string { return url.PathEscape(tok) }},
	{"query-escaped", func(_ *rand.Rand, tok string) string { return url.QueryEscape(tok) }},
	{"JSON-escaped", func(rng *rand.Rand, tok string) string {
		var b strings.Builder
		for _, c := range []byte(tok) {
			switch {
			case c == '/':
				b.WriteString(`\/`)
			case rng.IntN(4) == 0:
				fmt.Fprintf(&b, `\u%04x`, c)
			default:
				b.WriteByte(c)
			}
		}
		return b.String()
	}},
	{"split by %2F", func(rng *rand.Rand, tok string) string { i := splitAt(rng, tok); return tok[:i] + "%2F" + tok[i:] }},
	{"split by a slash", func(rng *rand.Rand, tok string) string { i := splitAt(rng, tok); return tok[:i] + "/" + tok[i:] }},
	{"after Bearer%20", func(_ *rand.Rand, tok string) string { return "Bearer%20" + tok }},
	{"after token=", func(_ *rand.Rand, tok string) string { return "token=" + tok }},
	{"after Bearer, in a header value", func(_ *rand.Rand, tok string) string { return "Bearer " + tok + ", other" }},
}

// pieceOf returns a run of at least redactMin characters of one of
// tokens that s shows, as written or with its escapes decoded, or "".
func pieceOf(s string, tokens []string) string {
	for _, v := range escapeViews(s) {
		for _, tok := range tokens {
			for i := 0; i+redactMin <= len(tok); i++ {
				if strings.Contains(v, tok[i:i+redactMin]) {
					return tok[i : i+redactMin]
				}
			}
		}
	}
	return ""
}

// TestRedactTokenShapes is the property of issue 34 B6 over the token
// shapes: for random tokens (1 to 8 configured, all redacted, not only
// the one presented), whatever text surrounds one of them in any shape
// (whole, a prefix, a suffix, a piece of at least redactMin characters,
// percent-encoded wholly, partly or twice, path- or query-escaped,
// JSON-escaped, split by %2F or a slash, after Bearer%20 or token=, in a
// header value), and wherever the text is cut (at max_body, at the header
// value bound, at the rejection row's hook bound), the recorded text shows
// no run of redactMin characters of any token, as written or decoded; a
// text without a token comes back unchanged.
func TestRedactTokenShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 6))
	for round := range 300 {
		tokens := randomTokens(rng, 1+rng.IntN(maxTokens))
		tc, err := newTokenChecker(tokens, nil, caddy.NewReplacer(), "")
		if err != nil {
			t.Fatal(err)
		}
		clean := randomText(rng, rng.IntN(400))
		if got := tc.redact(clean); got != clean || pieceOf(clean, tokens) != "" {
			t.Fatalf("round %d: a text without a token changed: %q -> %q", round, clean, got)
		}
		for _, shape := range tokenShapesCases {
			tok := tokens[rng.IntN(len(tokens))]
			shown := shape.make(rng, tok)
			text := randomText(rng, rng.IntN(200)) + shown + randomText(rng, rng.IntN(200))
			if rng.IntN(3) == 0 { // another token of the rotation too
				text += " " + tokens[rng.IntN(len(tokens))]
			}
			for _, cut := range []int{0, len(text) - 1 - rng.IntN(len(shown)), rng.IntN(len(text) + 1), maxHeaderValue} {
				out := tc.redactCut(text, max(cut, 0))
				if p := pieceOf(out, tokens); p != "" {
					t.Fatalf("round %d, %s, cut at %d: %q shows %q of a token\ntext %q", round, shape.name, cut, out, p, text)
				}
				if cut > 0 && len(out) > cut {
					t.Fatalf("round %d, %s: cut at %d, %d bytes kept", round, shape.name, cut, len(out))
				}
			}
			if !tc.holds(text) {
				t.Fatalf("round %d, %s: holds(%q) = false", round, shape.name, text)
			}
		}
	}
}

// TestHoldsToken: a request target holds a whole token anywhere, as
// written or decoded, not only as a segment or a parameter; a piece of
// one is not a whole token.
func TestHoldsToken(t *testing.T) {
	tok := "abc/DEF+ghi=jkl-0123456789-mnopqrstuvwxyz"
	tc, err := newTokenChecker([]string{utHookToken, tok}, nil, caddy.NewReplacer(), "")
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]bool{
		"/hooks/" + utHookToken:                                         true,
		"/hooks/Bearer%20" + utHookToken:                                true,
		"/hooks/x?a=token=" + utHookToken:                               true,
		"/hooks/" + url.PathEscape(tok):                                 true,
		"/hooks/" + tok:                                                 true, // its slash splits it into two segments
		"/hooks/" + strings.ReplaceAll(url.PathEscape(tok), "%", "%25"): true,
		"/hooks/" + utHookToken[:20] + "%2F" + utHookToken[20:]:         false, // not the token: a piece each side
		"/hooks/" + utHookToken[:31]:                                    false,
		"/hooks/wake":                                                   false,
	} {
		if got := tc.holdsToken(target); got != want {
			t.Errorf("holdsToken(%q) = %v, want %v", target, got, want)
		}
	}
}

// BenchmarkRedact: the cost of looking for the tokens in text without
// any (the common case): a header value, a request target, a JSON body
// (a GitHub delivery, with its \/ and \" escapes), and random text dense
// with escapes of every kind, 1 and 64 KiB.
func BenchmarkRedact(b *testing.B) {
	tc, err := newTokenChecker([]string{utHookToken, "rt-alt-hook-token-8d7c6b5a49382716f5e4d3c2b1a0"}, nil, caddy.NewReplacer(), "")
	if err != nil {
		b.Fatal(err)
	}
	body, err := os.ReadFile("../testdata/payloads/github-pull_request.json")
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ name, text string }{
		{"header", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)"},
		{"target", "/hooks/github?delivery=72d3162e-cc78-11e3-81ab-4c9367dc0958&x=%2Fa"},
		{"github-body", string(body)},
		{"escapes-1KiB", randomText(rng, 1<<10)},
		{"escapes-64KiB", randomText(rng, 64<<10)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.text)))
			for b.Loop() {
				_ = tc.redact(c.text)
			}
		})
	}
}
