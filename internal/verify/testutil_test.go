package verify

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
)

// b64 is standard padded base64.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// hexMAC is hex(HMAC-newHash(key, parts…)).
func hexMAC(newHash func() hash.Hash, key string, parts ...string) string {
	return hex.EncodeToString(mac(newHash, []byte(key), parts...))
}

// b64MAC is base64(HMAC-newHash(key, parts…)).
func b64MAC(newHash func() hash.Hash, key string, parts ...string) string {
	return b64(mac(newHash, []byte(key), parts...))
}

// Hash constructors for the vectors.
var (
	sha1H   = sha1.New
	sha256H = sha256.New
	sha512H = sha512.New
)

// bodyID is the delivery id of a provider without one: the body's hash.
func bodyID(s string) string { return bodyHash([]byte(s)) }

// sha256Hex is the hex SHA-256 of s.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// basicAuth is an Authorization: Basic value.
func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// hs256 is a compact JWS of claims under key.
func hs256(key, claims string) string {
	enc := base64.RawURLEncoding
	in := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims))
	return in + "." + enc.EncodeToString(mac(sha256.New, []byte(key), in))
}
