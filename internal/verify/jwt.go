package verify

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strings"
	"time"
)

// JWT bounds.
const (
	// maxJWTLen bounds a token (Google's are about 1 KiB).
	maxJWTLen = 8 << 10
	// maxJWKSKeys bounds the keys of one key set.
	maxJWKSKeys = 64
	// minRSABits is the smallest RSA key accepted.
	minRSABits = 2048
)

// jwtHeader is a token's JOSE header.
type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// jwtToken is a parsed, not yet verified, compact JWS.
type jwtToken struct {
	header  jwtHeader
	claims  []byte // the decoded payload
	signed  []byte // header.payload as sent
	sig     []byte
	rawSize int
}

// parseJWT splits and decodes a compact JWS (three base64url parts without
// padding). It fails with ReasonMalformedSignature on anything else.
func parseJWT(tok string) (*jwtToken, error) {
	if len(tok) == 0 || len(tok) > maxJWTLen {
		return nil, errors.New("length")
	}
	h, rest, ok1 := strings.Cut(tok, ".")
	p, s, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(s, ".") || h == "" || p == "" || s == "" {
		return nil, errors.New("not three parts")
	}
	dec := base64.RawURLEncoding.Strict()
	hb, err := dec.DecodeString(h)
	if err != nil {
		return nil, errors.New("header encoding")
	}
	var t jwtToken
	if err := json.Unmarshal(hb, &t.header); err != nil {
		return nil, errors.New("header JSON")
	}
	if t.claims, err = dec.DecodeString(p); err != nil {
		return nil, errors.New("payload encoding")
	}
	if !json.Valid(t.claims) || len(bytes.TrimSpace(t.claims)) == 0 || bytes.TrimSpace(t.claims)[0] != '{' {
		return nil, errors.New("payload JSON")
	}
	if t.sig, err = dec.DecodeString(s); err != nil {
		return nil, errors.New("signature encoding")
	}
	t.signed = []byte(tok[:len(h)+1+len(p)])
	t.rawSize = len(tok)
	return &t, nil
}

// keySource finds the public key for a token's kid; refresh asks for a
// fresh key set (the kid was not in the cached one).
type keySource func(ctx context.Context, kid string, now time.Time, refresh bool) (crypto.PublicKey, error)

// jwtKeys verifies token signatures: HS256 under the shared secrets, or
// RS256/ES256 under a key set.
type jwtKeys struct {
	hmacKeys [][]byte
	keys     keySource
}

// verifySig checks t's signature, failing with an *Error (or an
// *UnavailableError when the key set cannot be had).
func (j *jwtKeys) verifySig(ctx context.Context, t *jwtToken, now time.Time, header string) error {
	switch t.header.Alg {
	case "HS256":
		if len(j.hmacKeys) == 0 {
			return fail(ReasonUnsupportedVersion, header)
		}
		found := 0
		for _, k := range j.hmacKeys {
			m := hmac.New(sha256.New, k)
			m.Write(t.signed)
			found |= subtle.ConstantTimeCompare(m.Sum(nil), t.sig)
		}
		if found != 1 {
			return fail(ReasonBadSignature, header)
		}
		return nil
	case "RS256", "ES256":
		if j.keys == nil {
			return fail(ReasonUnsupportedVersion, header)
		}
		k, err := j.keys(ctx, t.header.Kid, now, false)
		if err == errNoKey {
			k, err = j.keys(ctx, t.header.Kid, now, true)
		}
		if err == errNoKey {
			return fail(ReasonUnknownKey, header)
		}
		if err != nil {
			return &UnavailableError{Reason: "key set: " + err.Error()}
		}
		if !verifyJWS(t, k) {
			return fail(ReasonBadSignature, header)
		}
		return nil
	}
	return fail(ReasonUnsupportedVersion, header)
}

// verifyJWS checks an RS256 or ES256 signature under k.
func verifyJWS(t *jwtToken, k crypto.PublicKey) bool {
	digest := sha256.Sum256(t.signed)
	switch t.header.Alg {
	case "RS256":
		rk, ok := k.(*rsa.PublicKey)
		return ok && rsa.VerifyPKCS1v15(rk, crypto.SHA256, digest[:], t.sig) == nil
	case "ES256":
		ek, ok := k.(*ecdsa.PublicKey)
		if !ok || ek.Curve != elliptic.P256() || len(t.sig) != 64 {
			return false
		}
		r, s := new(big.Int).SetBytes(t.sig[:32]), new(big.Int).SetBytes(t.sig[32:])
		return ecdsa.Verify(ek, digest[:], r, s)
	}
	return false
}

// errNoKey is a key set without the token's kid.
var errNoKey = errors.New("no key for kid")

// jwtClaims are the registered and Google claims the providers check.
type jwtClaims struct {
	Iss           string          `json:"iss"`
	Aud           json.RawMessage `json:"aud"`
	Exp           *float64        `json:"exp"`
	Nbf           *float64        `json:"nbf"`
	Iat           *float64        `json:"iat"`
	Email         string          `json:"email"`
	EmailVerified json.RawMessage `json:"email_verified"`
	Sha256        string          `json:"sha256"`
}

// readClaims decodes t's claims.
func readClaims(t *jwtToken) (jwtClaims, bool) {
	var c jwtClaims
	if err := json.Unmarshal(t.claims, &c); err != nil {
		return jwtClaims{}, false
	}
	return c, true
}

// checkTimes checks exp (required when needExp) and nbf with leeway:
// ReasonStaleTimestamp when outside.
func (c jwtClaims) checkTimes(now time.Time, leeway time.Duration, needExp bool, header string) error {
	sec := func(f *float64) time.Time { return time.Unix(int64(*f), 0) }
	if c.Exp == nil {
		if needExp {
			return fail(ReasonBadClaims, header)
		}
	} else if now.After(sec(c.Exp).Add(leeway)) {
		return fail(ReasonStaleTimestamp, header)
	}
	if c.Nbf != nil && now.Add(leeway).Before(sec(c.Nbf)) {
		return fail(ReasonStaleTimestamp, header)
	}
	if c.Iat != nil && now.Add(leeway).Before(sec(c.Iat)) {
		return fail(ReasonStaleTimestamp, header)
	}
	return nil
}

// hasAudience reports whether the aud claim (a string or an array of
// strings) contains want.
func (c jwtClaims) hasAudience(want string) bool {
	var one string
	if json.Unmarshal(c.Aud, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(c.Aud, &many) == nil {
		if slices.Contains(many, want) {
			return true
		}
	}
	return false
}

// emailVerified reports whether email_verified is true (or "true").
func (c jwtClaims) emailVerified() bool {
	s := string(bytes.TrimSpace(c.EmailVerified))
	return s == "true" || s == `"true"`
}

// jwkSet is a parsed JSON Web Key Set: kid → key.
type jwkSet map[string]crypto.PublicKey

// ParseJWKS parses a JSON Web Key Set of RSA (at least 2048 bits) and EC
// P-256 signing keys, at most 64; keys of other types or uses are skipped,
// a malformed one fails.
func ParseJWKS(b []byte) (map[string]crypto.PublicKey, error) {
	var doc struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			Alg string `json:"alg"`
			N   string `json:"n"`
			E   string `json:"e"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Y   string `json:"y"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, errors.New("not a JSON key set")
	}
	if doc.Keys == nil {
		return nil, errors.New(`no "keys" array`)
	}
	if len(doc.Keys) > maxJWKSKeys {
		return nil, fmt.Errorf("more than %d keys", maxJWKSKeys)
	}
	dec := base64.RawURLEncoding
	out := map[string]crypto.PublicKey{}
	for i, k := range doc.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err1 := dec.DecodeString(k.N)
			e, err2 := dec.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
				return nil, fmt.Errorf("keys[%d]: malformed RSA key", i)
			}
			pk := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
			if pk.N.BitLen() < minRSABits || pk.E < 3 || pk.E%2 == 0 {
				return nil, fmt.Errorf("keys[%d]: RSA key weaker than %d bits or with a bad exponent", i, minRSABits)
			}
			out[k.Kid] = pk
		case "EC":
			if k.Crv != "P-256" {
				continue
			}
			x, err1 := dec.DecodeString(k.X)
			y, err2 := dec.DecodeString(k.Y)
			if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
				return nil, fmt.Errorf("keys[%d]: malformed P-256 key", i)
			}
			pt := append(append([]byte{4}, x...), y...)
			pk, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pt)
			if err != nil {
				return nil, fmt.Errorf("keys[%d]: not a P-256 point", i)
			}
			out[k.Kid] = pk
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no RSA or P-256 signing key")
	}
	return out, nil
}

// jwksSource builds the key source of the jwks word: a file read and
// parsed now, or an https URL on an allowed host fetched on first use and
// cached for ttl; def is the provider's own URL when the word is unset.
func (b *builder) jwksSource(def string, hosts hostList, ttl time.Duration) (keySource, error) {
	src := b.cfg.JWKS
	if src == "" {
		src = def
	}
	if !strings.HasPrefix(src, "https://") && !strings.HasPrefix(src, "http://") {
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("jwks: %v", unwrapPathErr(err))
		}
		if len(data) > maxFetchSize {
			return nil, fmt.Errorf("jwks: %s is larger than %d bytes", src, maxFetchSize)
		}
		set, err := ParseJWKS(data)
		if err != nil {
			return nil, fmt.Errorf("jwks: %s: %v", src, err)
		}
		return func(_ context.Context, kid string, _ time.Time, _ bool) (crypto.PublicKey, error) {
			if k, ok := set[kid]; ok {
				return k, nil
			}
			return nil, errNoKey
		}, nil
	}
	hosts, err := b.hostsFor(hosts)
	if err != nil {
		return nil, err
	}
	if _, err := checkFetchURL(src, hosts); err != nil {
		return nil, fmt.Errorf("jwks: %q: %v", src, err)
	}
	f := newFetcher(b.httpClient(), hosts, ttl, func(data []byte) (any, error) {
		set, err := ParseJWKS(data)
		if err != nil {
			return nil, err
		}
		return jwkSet(set), nil
	})
	return func(ctx context.Context, kid string, now time.Time, refresh bool) (crypto.PublicKey, error) {
		v, err := f.get(ctx, src, now, refresh)
		if err != nil {
			return nil, err
		}
		if k, ok := v.(jwkSet)[kid]; ok {
			return k, nil
		}
		return nil, errNoKey
	}, nil
}

// unwrapPathErr drops the path from a file error (the message names it).
func unwrapPathErr(err error) error {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}
