package verify

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"testing"
	"time"
)

// TestJWTES256KeySet verifies an ES256 token under a P-256 key from a key
// set (the path Google-style providers with EC keys take), and refuses a
// token whose signature is not r||s of 64 bytes or is under another key.
func TestJWTES256KeySet(t *testing.T) {
	k := fixedP256(99)
	enc := base64.RawURLEncoding
	set, err := ParseJWKS([]byte(`{"keys":[{"kty":"EC","crv":"P-256","kid":"e1","use":"sig","x":"` +
		enc.EncodeToString(k.X.FillBytes(make([]byte, 32))) + `","y":"` + enc.EncodeToString(k.Y.FillBytes(make([]byte, 32))) + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	sign := func(key *ecdsa.PrivateKey, claims string) string {
		in := enc.EncodeToString([]byte(`{"alg":"ES256","kid":"e1"}`)) + "." + enc.EncodeToString([]byte(claims))
		d := sha256.Sum256([]byte(in))
		r, s, err := ecdsa.Sign(rand.Reader, key, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig := append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
		return in + "." + enc.EncodeToString(sig)
	}
	keys := jwtKeys{keys: func(_ context.Context, kid string, _ time.Time, _ bool) (crypto.PublicKey, error) {
		if key, ok := set[kid]; ok {
			return key, nil
		}
		return nil, errNoKey
	}}
	for _, tc := range []struct {
		tok  string
		fail bool
	}{
		{sign(k, `{"exp":1}`), false},
		{sign(otherP256, `{"exp":1}`), true},
		{sign(k, `{"exp":1}`)[:10] + "AAAA", true},
	} {
		j, err := parseJWT(tc.tok)
		if err != nil {
			if !tc.fail {
				t.Fatal(err)
			}
			continue
		}
		if err := keys.verifySig(t.Context(), j, testNow, "Authorization"); (err != nil) != tc.fail {
			t.Fatalf("verifySig = %v, want failure %v", err, tc.fail)
		}
	}
}
