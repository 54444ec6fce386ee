package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Secrets used across the tests (all at least MinSecretLen bytes).
const (
	githubSecret   = "It's a Secret to Everybody"
	stripeSecret   = "whsec_test_5f0c1d2e3a4b5c6d7e8f9a0b"
	slackSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	standardSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherSecret    = "a-completely-different-secret"
	genericSecret  = "generic-hmac-secret-0123456789"
)

// testNow is the fixed clock of the request tests.
var testNow = time.Unix(1700000000, 0)

// ts formats testNow shifted by d as unix seconds.
func ts(d time.Duration) string { return strconv.FormatInt(testNow.Add(d).Unix(), 10) }

// mac computes, independently of the package, the HMAC of the
// concatenated parts under key with newHash.
func mac(newHash func() hash.Hash, key []byte, parts ...string) []byte {
	m := hmac.New(newHash, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// hexSHA256 is hex(HMAC-SHA256(secret, parts...)).
func hexSHA256(secret string, parts ...string) string {
	return hex.EncodeToString(mac(sha256.New, []byte(secret), parts...))
}

// standardKey decodes a whsec_ secret the way the Standard Webhooks
// reference libraries do.
func standardKey(t testing.TB, secret string) []byte {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	return k
}

// standardSig is a "v1,<base64>" entry for id, timestamp and body.
func standardSig(t testing.TB, secret, id, timestamp, body string) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(sha256.New, standardKey(t, secret), id, ".", timestamp, ".", body))
}

// algorithms for the generic scheme, independent of the package's table.
var testHashes = map[string]func() hash.Hash{"sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}

// hdr builds an http.Header from name/value pairs (names canonicalised,
// repeated names appended).
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// mustNew builds a Verifier or fails the test.
func mustNew(t testing.TB, cfg Config) *Verifier {
	t.Helper()
	v, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%v): %v", cfg, err)
	}
	return v
}

// reqCase is one request against a Verifier.
type reqCase struct {
	name       string
	h          http.Header
	body       string
	now        time.Time // zero = testNow
	wantReason string    // "" = success
	wantHeader string    // checked when wantReason is set and this is non-empty
	want       Result
}

// runCases runs every case against v.
func runCases(t *testing.T, v *Verifier, cases []reqCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = testNow
			}
			got, err := v.Verify(tc.h, []byte(tc.body), now)
			if tc.wantReason == "" {
				if err != nil {
					t.Fatalf("Verify: unexpected error %v", err)
				}
				if !sameResult(got, tc.want) {
					t.Fatalf("Verify = %+v, want %+v", got, tc.want)
				}
				return
			}
			var ve *Error
			if !errors.As(err, &ve) {
				t.Fatalf("Verify error = %v (%T), want *Error %q", err, err, tc.wantReason)
			}
			if ve.Reason != tc.wantReason {
				t.Fatalf("Verify reason = %q, want %q", ve.Reason, tc.wantReason)
			}
			if tc.wantHeader != "" && ve.Header != tc.wantHeader {
				t.Fatalf("Verify header = %q, want %q", ve.Header, tc.wantHeader)
			}
			if !reflect.DeepEqual(got, Result{}) {
				t.Fatalf("failed Verify returned non-zero result %+v", got)
			}
		})
	}
}

// sameResult compares the fields want sets (Event and Payload only when
// set in want).
func sameResult(got, want Result) bool {
	return got.DeliveryID == want.DeliveryID && got.Challenge == want.Challenge &&
		(want.Event == "" || got.Event == want.Event) &&
		(want.Payload == nil || string(got.Payload) == string(want.Payload))
}

// flipHex changes the last hex digit of s.
func flipHex(s string) string {
	last := s[len(s)-1]
	r := byte('0')
	if last == '0' {
		r = '1'
	}
	return s[:len(s)-1] + string(r)
}
