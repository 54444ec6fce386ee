package verify

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	pubsubAud   = "https://hooks.example.com/hooks/p"
	pubsubSA    = "push@my-project.iam.gserviceaccount.com"
	pubsubBody  = `{"message":{"attributes":{"eventType":"OBJECT_FINALIZE"},"data":"SGVsbG8gQ2xvdWQgUHViL1N1YiEgSGVyZSBpcyBteSBtZXNzYWdlIQ==","messageId":"2070443601311540","publishTime":"2021-02-26T19:13:55.749Z"},"subscription":"projects/myproject/subscriptions/mysubscription"}`
	googleCerts = googleJWKS
)

// jwksOf is a key set with key under kid.
func jwksOf(kid string, key *rsa.PublicKey) string {
	enc := base64.RawURLEncoding
	return `{"keys":[{"kty":"RSA","alg":"RS256","use":"sig","kid":"` + kid + `","n":"` + enc.EncodeToString(key.N.Bytes()) +
		`","e":"` + enc.EncodeToString(big.NewInt(int64(key.E)).Bytes()) + `"}]}`
}

// rs256 is a compact JWS of claims under key with kid.
func rs256(key *rsa.PrivateKey, kid, claims string) string {
	enc := base64.RawURLEncoding
	in := enc.EncodeToString([]byte(`{"alg":"RS256","kid":"`+kid+`","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims))
	d := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	if err != nil {
		panic(err)
	}
	return in + "." + enc.EncodeToString(sig)
}

// googleClaims are claims for aud and email around testNow.
func googleClaims(aud, email string) string {
	return `{"aud":"` + aud + `","azp":"1","email":"` + email + `","email_verified":true,"exp":` +
		strconv.FormatInt(testNow.Add(time.Hour).Unix(), 10) + `,"iat":` + strconv.FormatInt(testNow.Unix(), 10) +
		`,"iss":"https://accounts.google.com","sub":"1"}`
}

// pubsubKey is the Google test key.
func pubsubKey() *rsa.PrivateKey { _, k := testRSA(); return k }

// pubsubEnv serves Google's key set.
func pubsubEnv(t *testing.T) Env {
	c, _ := newStub(map[string]string{googleCerts: jwksOf("k1", &pubsubKey().PublicKey)})
	return Env{HTTPClient: c}
}

var pubsubCfg = Config{Scheme: "pubsub", Audience: pubsubAud, ServiceAccount: pubsubSA}

var _ = providerTest("pubsub", providerTests{
	vectors: []vector{{
		name:   "push",
		source: "computed from https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions: an RS256 OIDC token from Google's key set (a test key served for its URL)",
		cfg:    pubsubCfg,
		req: func() *Request {
			return post(pubsubBody, "Authorization", "Bearer "+rs256(pubsubKey(), "k1", googleClaims(pubsubAud, pubsubSA)))()
		},
		now:   testNow,
		stale: testNow.Add(time.Hour + 2*time.Minute),
		want:  Result{DeliveryID: "2070443601311540", Event: "OBJECT_FINALIZE"},
	}},
	env: pubsubEnv,
	wrong: func(t *testing.T, cfg Config) Config {
		k, _ := testRSA()
		path := filepath.Join(t.TempDir(), "jwks.json")
		if err := os.WriteFile(path, []byte(jwksOf("k1", &k.PublicKey)), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.JWKS = path
		return cfg
	},
	notes: "the token does not cover the body",
})

// TestPubSubRefusals: claims, key ids, key sets.
func TestPubSubRefusals(t *testing.T) {
	client, stub := newStub(map[string]string{googleCerts: jwksOf("k1", &pubsubKey().PublicKey)})
	v, err := NewWithEnv(pubsubCfg, Env{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		tok    string
		reason string
	}{
		"another audience":        {rs256(pubsubKey(), "k1", googleClaims("https://other.example/", pubsubSA)), ReasonBadClaims},
		"another service account": {rs256(pubsubKey(), "k1", googleClaims(pubsubAud, "evil@other.iam.gserviceaccount.com")), ReasonBadClaims},
		"unknown kid":             {rs256(pubsubKey(), "k2", googleClaims(pubsubAud, pubsubSA)), ReasonUnknownKey},
		"alg none":                {"eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(googleClaims(pubsubAud, pubsubSA))) + ".AA", ReasonUnsupportedVersion},
		"HS256 without a secret":  {hs256("x", googleClaims(pubsubAud, pubsubSA)), ReasonUnsupportedVersion},
		"not a JWT":               {"abc", ReasonMalformedSignature},
	} {
		_, err := v.VerifyRequest(post(pubsubBody, "Authorization", "Bearer "+tc.tok)(), testNow)
		var ve *Error
		if !errors.As(err, &ve) || ve.Reason != tc.reason {
			t.Errorf("%s: %v, want %s", name, err, tc.reason)
		}
	}
	// an unknown kid refetches the set, at most once a minute
	if n := stub.hitsOf(googleCerts); n != 1 {
		t.Errorf("key set fetched %d times, want once", n)
	}
	unknown := post(pubsubBody, "Authorization", "Bearer "+rs256(pubsubKey(), "k2", googleClaims(pubsubAud, pubsubSA)))
	for range 3 {
		v.VerifyRequest(unknown(), testNow.Add(2*time.Minute))
	}
	if n := stub.hitsOf(googleCerts); n != 2 {
		t.Errorf("key set fetched %d times, want 2 (one refetch for the unknown kid a minute later)", n)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Scheme: "pubsub", ServiceAccount: pubsubSA}, "audience: required"},
		{Config{Scheme: "pubsub", Audience: pubsubAud}, "service_account: required"},
		{Config{Scheme: "pubsub", Audience: pubsubAud, ServiceAccount: pubsubSA, JWKS: "https://evil.example.com/keys"}, `jwks: "https://evil.example.com/keys": host "evil.example.com" is not allow-listed`},
		{Config{Scheme: "pubsub", Audience: pubsubAud, ServiceAccount: pubsubSA, JWKS: "http://www.googleapis.com/oauth2/v3/certs"}, "not https"},
		{Config{Scheme: "pubsub", Audience: pubsubAud, ServiceAccount: pubsubSA, JWKS: filepath.Join(t.TempDir(), "missing.json")}, "jwks: "},
		{Config{Scheme: "pubsub", Audience: pubsubAud, ServiceAccount: pubsubSA, JWKS: writeTemp(t, `{"keys":[{"kty":"RSA","kid":"a","n":"AQAB","e":"AQAB"}]}`)}, "keys[0]: RSA key weaker than 2048 bits"},
		{Config{Scheme: "pubsub", Audience: pubsubAud, ServiceAccount: pubsubSA, JWKS: writeTemp(t, `not json`)}, "not a JSON key set"},
		{Config{Scheme: "pubsub", Audience: pubsubAud, ServiceAccount: pubsubSA, CertHosts: []string{"keys.example.com"}}, "cert_hosts: only with a jwks URL"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// writeTemp writes s to a temporary file and returns its path.
func writeTemp(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
