package caddyhook

import (
	"crypto/sha256"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestScanTarget covers the URL shapes of issue 17 item 9: which carry the
// token (refused with 400) and which only need redacting in the access log.
func TestScanTarget(t *testing.T) {
	h := newTestHandler(t, nil, func(h *Handler) { h.Tokens = []string{utHookToken + "-second"} })
	tok := utHookToken
	for _, tc := range []struct {
		target         string
		refuse, redact bool
		redacted       string // "" = unchanged
	}{
		{target: "/hooks/wake"},
		{target: "/hooks/wake?a=1&b=2"},
		{target: "/hooks/wake?tokens=1", redact: true, redacted: "/hooks/wake?tokens=REDACTED"},
		{target: "/hooks/wake?token=x", refuse: true, redact: true, redacted: "/hooks/wake?token=REDACTED"},
		{target: "/hooks/wake?TOKEN=x&a=1", refuse: true, redact: true, redacted: "/hooks/wake?TOKEN=REDACTED&a=1"},
		{target: "/hooks/wake;token=" + tok, refuse: true, redact: true, redacted: "/hooks/wake;token=REDACTED"},
		{target: "/hooks/wake?a=1;token=x", refuse: true, redact: true, redacted: "/hooks/wake?a=1;token=REDACTED"},
		{target: "/hooks/wake?a=1#token=" + tok, refuse: true, redact: true, redacted: "/hooks/wake?a=1#token=REDACTED"},
		{target: "/hooks/wake#token=x", refuse: true, redact: true, redacted: "/hooks/wake#token=REDACTED"},
		{target: "/hooks/wake?token+=x", refuse: true, redact: true, redacted: "/hooks/wake?token+=REDACTED"},
		{target: "/hooks/wake?+token%20=x", refuse: true, redact: true, redacted: "/hooks/wake?+token%20=REDACTED"},
		{target: "/hooks/wake?t%6Fken=x", refuse: true, redact: true, redacted: "/hooks/wake?t%6Fken=REDACTED"},
		{target: "/hooks/wake?access_token=other", redact: true, redacted: "/hooks/wake?access_token=REDACTED"},
		{target: "/hooks/wake?access%5Ftoken=other", redact: true, redacted: "/hooks/wake?access%5Ftoken=REDACTED"},
		{target: "/hooks/wake?access_token=" + tok, refuse: true, redact: true, redacted: "/hooks/wake?access_token=REDACTED"},
		{target: "/hooks/wake?x=" + tok, refuse: true, redact: true, redacted: "/hooks/wake?x=REDACTED"},
		{target: "/hooks/wake?x=" + tok + "-second", refuse: true, redact: true, redacted: "/hooks/wake?x=REDACTED"},
		{target: "/hooks/wake?x=" + url.QueryEscape(" "+tok+" "), refuse: true, redact: true, redacted: "/hooks/wake?x=REDACTED"},
		{target: "/hooks/wake?x=" + strings.ReplaceAll(tok, "-", "%2d"), refuse: true, redact: true, redacted: "/hooks/wake?x=REDACTED"},
		{target: "/hooks/wake?" + tok, refuse: true, redact: true, redacted: "/hooks/wake?REDACTED"},
		{target: "/hooks/" + tok, refuse: true, redact: true, redacted: "/hooks/REDACTED"},
		{target: "/hooks/" + tok + "/x?y=1", refuse: true, redact: true, redacted: "/hooks/REDACTED/x?y=1"},
		// the token inside a longer value is still the token in the URL
		// (issue 34 B6), as is a piece of one in the access log
		{target: "/hooks/x?y=" + tok + "x", refuse: true, redact: true, redacted: "/hooks/x?y=[REDACTED]x"},
		{target: "/hooks/Bearer%20" + tok, refuse: true, redact: true, redacted: "/hooks/Bearer%20[REDACTED]"},
		{target: "/hooks/x?y=" + tok[:20], redact: true, redacted: "/hooks/x?y=[REDACTED]"},
		{target: "/hooks/wake?&&;#", redacted: ""},
	} {
		refuse, redact := h.tokens.scanTarget(tc.target)
		if refuse != tc.refuse || redact != tc.redact {
			t.Errorf("scanTarget(%q) = %v, %v; want %v, %v", tc.target, refuse, redact, tc.refuse, tc.redact)
		}
		want := tc.redacted
		if want == "" {
			want = tc.target
		}
		if got := h.tokens.redactTarget(tc.target); got != want {
			t.Errorf("redactTarget(%q) = %q, want %q", tc.target, got, want)
		}
	}
}

// TestScanTargetNoAlloc: the check runs on every request.
func TestScanTargetNoAlloc(t *testing.T) {
	h := newTestHandler(t, nil, nil)
	for _, target := range []string{"/hooks/wake", "/hooks/github?a=1&b=2&page=3"} {
		if n := testing.AllocsPerRun(100, func() { h.tokens.scanTarget(target) }); n != 0 {
			t.Errorf("scanTarget(%q) allocates %v times", target, n)
		}
	}
}

// FuzzRedactTarget: redacting never panics, never leaves the token in, and
// keeps every target that needs no redacting unchanged.
func FuzzRedactTarget(f *testing.F) {
	for _, s := range []string{"/hooks/wake?token=x", "/hooks/a;b#c?d&e=f", "/%zz?%zz=%zz", "?+=+", "/hooks/" + utHookToken, "#;?&="} {
		f.Add(s)
	}
	h := newTestHandler(f, nil, nil)
	f.Fuzz(func(t *testing.T, target string) {
		refuse, redact := h.tokens.scanTarget(target)
		out := h.tokens.redactTarget(target)
		if strings.Contains(out, utHookToken) {
			t.Fatalf("redactTarget(%q) = %q keeps the token", target, out)
		}
		if refuse && !redact {
			t.Fatalf("refused but not redacted: %q", target)
		}
		if !redact && out != target && utf8.ValidString(target) {
			t.Fatalf("redactTarget changed %q to %q though nothing needs redacting", target, out)
		}
	})
}

// TestQueryHasToken: a query parameter named token, in any case, percent-
// or plus-encoded, is refused (scanTarget, before anything else).
func TestQueryHasToken(t *testing.T) {
	h := &Handler{tokens: new(tokenChecker)}
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"token=abc", true},
		{"TOKEN=abc", true},
		{"Token=", true},
		{"token", true},
		{"a=1&token=abc", true},
		{"a=1&b=2&tOkEn=x&c=3", true},
		{"t%6Fken=abc", true},
		{"t%6fken=abc", true},
		{"%74%6F%6B%65%6E=abc", true},
		{"tok%65n%20=abc", true},
		{"a=1&to%6Ben=x", true},
		{"", false},
		{"tokens=abc", false},
		{"x=token", false},
		{"access_token=abc", false},
		{"tok=abc", false},
		{"a=1&b=token&c=tokenx", false},
		{"t%6Fkens=abc", false},
		{"t%zzoken=abc", false},
		{"&&&", false},
	} {
		if got, _ := h.tokens.scanTarget("/hooks/wake?" + tc.query); got != tc.want {
			t.Errorf("scanTarget(/hooks/wake?%s) refuses: %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestQueryHasTokenNoAlloc(t *testing.T) {
	h := &Handler{tokens: new(tokenChecker)}
	target := "/hooks/wake?a=1&b=2&page=3&sort=desc&filter=none"
	if n := testing.AllocsPerRun(100, func() { h.tokens.scanTarget(target) }); n != 0 {
		t.Fatalf("scanTarget allocates %v times for a plain query", n)
	}
}

func TestPresentedToken(t *testing.T) {
	aliases := []string{headerServiceToken, "X-Openclaw-Token"}
	for _, tc := range []struct {
		name, auth, want string
		service, alias   []string
	}{
		{name: "bearer", auth: "Bearer abc", want: "abc"},
		{name: "bearer lower", auth: "bearer abc", want: "abc"},
		{name: "bearer upper", auth: "BEARER abc", want: "abc"},
		{name: "bearer mixed", auth: "bEaReR abc", want: "abc"},
		{name: "bearer trims", auth: "Bearer    abc  ", want: "abc"},
		{name: "bearer empty", auth: "Bearer ", want: ""},
		{name: "bearer blank falls back", auth: "Bearer    ", service: []string{"svc"}, want: "svc"},
		{name: "no space after scheme", auth: "Bearerabc", want: ""},
		{name: "basic refused", auth: "Basic dXNlcjpwYXNz", want: ""},
		{name: "basic with service token", auth: "Basic dXNlcjpwYXNz", service: []string{"svc"}, want: "svc"},
		{name: "service token", service: []string{"svc"}, want: "svc"},
		{name: "service token trimmed", service: []string{"  svc "}, want: "svc"},
		{name: "bearer wins over service", auth: "Bearer abc", service: []string{"svc"}, want: "abc"},
		{name: "alias", alias: []string{"oc"}, want: "oc"},
		{name: "service token before alias", service: []string{"svc"}, alias: []string{"oc"}, want: "svc"},
		{name: "empty service token falls back to alias", service: []string{" "}, alias: []string{"oc"}, want: "oc"},
		{name: "only the first copy counts", service: []string{"", "svc"}, want: ""},
		{name: "nothing", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.auth != "" {
				h.Set("Authorization", tc.auth)
			}
			for _, v := range tc.service {
				h.Add("x-service-token", v)
			}
			for _, v := range tc.alias {
				h.Add("x-openclaw-token", v)
			}
			if got := (&tokenChecker{headers: aliases}).presented(h); got != tc.want {
				t.Fatalf("presentedToken = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTokenIndex(t *testing.T) {
	const a, b = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	want := []tokenDigest{sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))}
	for _, tc := range []struct {
		presented string
		index     int
	}{
		{a, 0},
		{b, 1},
		{"", -1},
		{a[:31], -1},
		{a + "0", -1},
		{strings.ToUpper(b), -1},
		{"1123456789abcdef0123456789abcdef", -1},
	} {
		if got := (&tokenChecker{digests: want}).index(tc.presented); got != tc.index {
			t.Errorf("tokenIndex(%q) = %d, want %d", tc.presented, got, tc.index)
		}
	}
	empty := []tokenDigest{sha256.Sum256(nil)}
	if (&tokenChecker{digests: empty}).index("") != -1 {
		t.Error("an empty presented token matched the digest of the empty string")
	}
}

// TestTokenAuthorized: a request is authorized when it presents the
// token and no wrong value beside it, in any of the token headers (the
// gateway refuses two X-OpenClaw-Token headers, valid and wrong: the
// edge must not be more permissive; D32/D33 of issue 35).
func TestTokenAuthorized(t *testing.T) {
	const a, b = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	tc := &tokenChecker{digests: []tokenDigest{sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))},
		headers: []string{"X-Service-Token", "X-Openclaw-Token"}}
	for _, c := range []struct {
		name string
		hdr  [][2]string
		want bool
	}{
		{"bearer", [][2]string{{"Authorization", "Bearer " + a}}, true},
		{"bearer, scheme in any case", [][2]string{{"Authorization", "bEaReR  " + b + " "}}, true},
		{"service token", [][2]string{{"X-Service-Token", a}}, true},
		{"alias", [][2]string{{"X-Openclaw-Token", b}}, true},
		{"both tokens of a rotation", [][2]string{{"Authorization", "Bearer " + a}, {"X-Openclaw-Token", b}}, true},
		{"the same token twice (the gateway joins the copies: a wrong value)", [][2]string{{"X-Openclaw-Token", a}, {"X-Openclaw-Token", a}}, false},
		{"the same bearer token twice", [][2]string{{"Authorization", "Bearer " + a}, {"Authorization", "Bearer " + a}}, true},
		{"an empty bearer copy beside the token", [][2]string{{"Authorization", "Bearer " + a}, {"Authorization", ""}}, false},
		{"an empty header beside the token", [][2]string{{"X-Service-Token", " "}, {"X-Openclaw-Token", a}}, true},
		{"an empty copy beside the token", [][2]string{{"X-Openclaw-Token", a}, {"X-Openclaw-Token", " "}}, false},
		{"an empty copy before the token", [][2]string{{"X-Service-Token", ""}, {"X-Service-Token", a}}, false},
		{"basic beside the token", [][2]string{{"Authorization", "Basic dXNlcjpwYXNz"}, {"X-Service-Token", a}}, true},
		{"nothing", nil, false},
		{"basic only", [][2]string{{"Authorization", "Basic dXNlcjpwYXNz"}}, false},
		{"wrong", [][2]string{{"Authorization", "Bearer wrong"}}, false},
		{"two alias copies, valid and wrong (D33)", [][2]string{{"X-Openclaw-Token", a}, {"X-Openclaw-Token", "wrong"}}, false},
		{"two alias copies, wrong and valid", [][2]string{{"X-Openclaw-Token", "wrong"}, {"X-Openclaw-Token", a}}, false},
		{"valid alias, wrong service token (D32)", [][2]string{{"X-Openclaw-Token", a}, {"X-Service-Token", "wrong"}}, false},
		{"valid bearer, wrong alias", [][2]string{{"Authorization", "Bearer " + a}, {"X-Openclaw-Token", "wrong"}}, false},
		{"wrong bearer, valid alias", [][2]string{{"Authorization", "Bearer wrong"}, {"X-Openclaw-Token", a}}, false},
		{"two bearer values, second wrong", [][2]string{{"Authorization", "Bearer " + a}, {"Authorization", "Bearer wrong"}}, false},
		{"one value listing two tokens", [][2]string{{"X-Openclaw-Token", a + ", " + a}}, false},
	} {
		h := http.Header{}
		for _, kv := range c.hdr {
			h.Add(kv[0], kv[1])
		}
		if got := tc.authorized(h); got != c.want {
			t.Errorf("%s: authorized = %v, want %v", c.name, got, c.want)
		}
	}
}
