package caddyhook

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

func TestQueryHasToken(t *testing.T) {
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
		if got := queryHasToken(tc.query); got != tc.want {
			t.Errorf("queryHasToken(%q) = %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestQueryHasTokenNoAlloc(t *testing.T) {
	q := "a=1&b=2&page=3&sort=desc&filter=none"
	if n := testing.AllocsPerRun(100, func() { queryHasToken(q) }); n != 0 {
		t.Fatalf("queryHasToken allocates %v times for a plain query", n)
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
			if got := presentedToken(h, aliases); got != tc.want {
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
		if got := tokenIndex(tc.presented, want); got != tc.index {
			t.Errorf("tokenIndex(%q) = %d, want %d", tc.presented, got, tc.index)
		}
	}
	empty := []tokenDigest{sha256.Sum256(nil)}
	if tokenIndex("", empty) != -1 {
		t.Error("an empty presented token matched the digest of the empty string")
	}
}

func TestIsJSONContentType(t *testing.T) {
	for _, tc := range []struct {
		ct   string
		want bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"application/json;charset=UTF-8", true},
		{"Application/JSON", true},
		{"application/json;", true},
		{"application/vnd.api+json", true},
		{"application/cloudevents+json; charset=utf-8", true},
		{"application/problem+json", true},
		{"", false},
		{"text/plain", false},
		{"text/plain; charset=utf-8", false},
		{"text/json", false},
		{"application/x-www-form-urlencoded", false},
		{"multipart/form-data; boundary=x", false},
		{"application/jsonx", false},
		{"text/vnd.x+json", false},
		{"application/json; charset", false},
		{"application/", false},
		{"application/json/x", false},
		{"json", false},
	} {
		if got := isJSONContentType(tc.ct); got != tc.want {
			t.Errorf("isJSONContentType(%q) = %v, want %v", tc.ct, got, tc.want)
		}
	}
}

// failingReader fails the test if the body is read at all.
type failingReader struct{ t *testing.T }

func (r failingReader) Read([]byte) (int, error) {
	r.t.Error("body was read although Content-Length is over the limit")
	return 0, io.EOF
}

func TestReadBody(t *testing.T) {
	const limit = 10
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		body    io.Reader // nil: http.NoBody
		length  int64     // Content-Length; -1 = chunked/unknown
		bufCap  int
		want    string
		wantErr error
	}{
		{name: "declared over limit", body: strings.NewReader("01234567890"), length: 11, wantErr: errBodyTooLarge},
		{name: "declared exactly limit", body: strings.NewReader("0123456789"), length: 10, want: "0123456789"},
		{name: "chunked over limit", body: strings.NewReader("01234567890"), length: -1, wantErr: errBodyTooLarge},
		{name: "chunked far over limit", body: strings.NewReader(strings.Repeat("x", 1<<20)), length: -1, wantErr: errBodyTooLarge},
		{name: "chunked exactly limit", body: strings.NewReader("0123456789"), length: -1, want: "0123456789"},
		{name: "chunked one byte at a time", body: iotest.OneByteReader(strings.NewReader("0123456789")), length: -1, want: "0123456789"},
		{name: "chunked over limit one byte at a time", body: iotest.OneByteReader(strings.NewReader("0123456789A")), length: -1, wantErr: errBodyTooLarge},
		{name: "understated length", body: strings.NewReader("0123456789ABC"), length: 3, wantErr: errBodyTooLarge},
		{name: "empty", body: strings.NewReader(""), length: 0, want: ""},
		{name: "no body", length: 0, want: ""},
		{name: "zero-capacity buffer grows", body: strings.NewReader("0123456789"), length: -1, bufCap: -1, want: "0123456789"},
		{name: "read error", body: io.MultiReader(strings.NewReader("01"), iotest.ErrReader(errBoom)), length: -1, wantErr: errBoom},
		{name: "data with EOF", body: iotest.DataErrReader(strings.NewReader("0123")), length: -1, want: "0123"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/hooks/wake", nil)
			r.Body = http.NoBody
			if tc.body != nil {
				r.Body = io.NopCloser(tc.body)
			}
			if tc.length > limit {
				r.Body = io.NopCloser(failingReader{t})
			}
			r.ContentLength = tc.length
			var buf []byte
			switch {
			case tc.bufCap > 0:
				buf = make([]byte, 0, tc.bufCap)
			case tc.bufCap == 0:
				buf = make([]byte, 0, 4)
			}
			got, err := readBody(r, limit, buf)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if errors.Is(err, errBodyTooLarge) && tc.length <= limit && len(got) <= limit {
				t.Fatalf("oversize body cut to %d bytes", len(got))
			}
			if err == nil && string(got) != tc.want {
				t.Fatalf("body = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReadBodyLarge reads a body much larger than the pooled buffer.
func TestReadBodyLarge(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	for _, limit := range []int64{int64(len(data)), int64(len(data)) - 1} {
		r := httptest.NewRequest(http.MethodPost, "/hooks/wake", io.NopCloser(iotest.HalfReader(bytes.NewReader(data))))
		r.ContentLength = -1
		got, err := readBody(r, limit, make([]byte, 0, 4<<10))
		if limit == int64(len(data)) {
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("limit %d: err=%v, %d bytes, equal=%v", limit, err, len(got), bytes.Equal(got, data))
			}
			continue
		}
		if !errors.Is(err, errBodyTooLarge) {
			t.Fatalf("limit %d: err = %v, want errBodyTooLarge", limit, err)
		}
	}
}
