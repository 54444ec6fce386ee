package caddyhook

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Signing as the providers of the registry sign, computed here with the
// standard library from each provider's documented algorithm,
// independently of package verify (whose own vectors are the providers'
// published ones): the handler's tests send what the providers send.

// Secrets and keys of the provider tests; each is distinctive, so a log
// check can look for it.
const (
	pvMetaSecret    = "meta-app-secret-6d1f0b9e7c5a3f21"
	pvMetaToken     = "meta-verify-token-2c4e6a8b0d1f3e5a"
	pvZoomSecret    = "zoom-secret-token-9a7c5e3b1d0f2e4c"
	pvTwilioSecret  = "twilio-auth-token-4b6d8f0a2c4e6a8b"
	pvShopifySecret = "shopify-client-secret-1e3c5a7b9d0f"
	pvGitLabSecret  = "gitlab-secret-token-7f5d3b1a9c8e6d4b"
	pvFeishuToken   = "feishu-verification-token-5a3c1e"
	pvFeishuKey     = "feishu-encrypt-key-8b6d4f2a0c9e7b5d"
	pvGraphState    = "graph-client-state-3f5a7c9e1b2d4f6a"
)

// pvClerkKey is the Standard Webhooks key of the clerk tests;
// pvClerkSecret is how Clerk shows it.
var (
	pvClerkKey    = []byte("clerk-std-key-4e6a8c0b2d4f6a8c")
	pvClerkSecret = "whsec_" + base64.StdEncoding.EncodeToString(pvClerkKey)
)

// Public-key pairs of the provider tests, generated once per test binary.
var (
	pvDiscordPub, pvDiscordKey = mustEd25519()
	pvSendGridKey              = mustP256()
	pvGoogleKey                = sync.OnceValue(mustRSA) // an RSA key takes a while: made when a test needs it
)

func mustEd25519() (ed25519.PublicKey, ed25519.PrivateKey) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return pub, priv
}

func mustP256() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

func mustRSA() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// pvDiscordPublicKey is the Discord application's Public Key as the
// developer portal shows it (hex).
func pvDiscordPublicKey() string { return hex.EncodeToString(pvDiscordPub) }

// pvSendGridPublicKey is SendGrid's verification key as its settings
// show it (base64 of the DER SubjectPublicKeyInfo).
func pvSendGridPublicKey() string {
	der, err := x509.MarshalPKIXPublicKey(&pvSendGridKey.PublicKey)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(der)
}

// metaHeaders signs body as Meta does (X-Hub-Signature-256).
func metaHeaders(secret, body string) []string {
	return []string{"X-Hub-Signature-256: sha256=" + hex.EncodeToString(macOf(sha256.New, []byte(secret), body))}
}

// discordHeaders signs body as Discord does at time at: Ed25519 over the
// timestamp and the body.
func discordHeaders(key ed25519.PrivateKey, body string, at time.Time) []string {
	ts := unixString(at)
	return []string{"X-Signature-Timestamp: " + ts, "X-Signature-Ed25519: " + hex.EncodeToString(ed25519.Sign(key, []byte(ts+body)))}
}

// zoomHeaders signs body as Zoom does at time at.
func zoomHeaders(secret, body string, at time.Time) []string {
	ts := unixString(at)
	return []string{"X-Zm-Request-Timestamp: " + ts,
		"X-Zm-Signature: v0=" + hex.EncodeToString(macOf(sha256.New, []byte(secret), "v0:", ts, ":", body))}
}

// zoomEncrypted is the encryptedToken Zoom expects for plainToken.
func zoomEncrypted(secret, plain string) string {
	return hex.EncodeToString(macOf(sha256.New, []byte(secret), plain))
}

// twilioHeaders signs a form body as Twilio does: HMAC-SHA1 of the URL
// Twilio called followed by every field name and value, sorted by name,
// base64.
func twilioHeaders(secret, fullURL, form string) []string {
	vals, err := url.ParseQuery(form)
	if err != nil {
		panic(err)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(fullURL)
	for _, k := range keys {
		for _, v := range vals[k] {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	return []string{"X-Twilio-Signature: " + base64.StdEncoding.EncodeToString(macOf(sha1.New, []byte(secret), b.String())),
		"Content-Type: application/x-www-form-urlencoded"}
}

// shopifyHeaders signs body as Shopify does; topic is X-Shopify-Topic.
func shopifyHeaders(secret, body, topic, id string) []string {
	return []string{"X-Shopify-Hmac-Sha256: " + base64.StdEncoding.EncodeToString(macOf(sha256.New, []byte(secret), body)),
		"X-Shopify-Topic: " + topic, "X-Shopify-Shop-Domain: shop.myshopify.com", "X-Shopify-Webhook-Id: " + id}
}

// clerkHeaders signs body as Clerk (Svix) does, with the svix- names.
func clerkHeaders(key []byte, id, body string, at time.Time) []string {
	ts := unixString(at)
	return []string{"Svix-Id: " + id, "Svix-Timestamp: " + ts,
		"Svix-Signature: v1," + base64.StdEncoding.EncodeToString(macOf(sha256.New, key, id, ".", ts, ".", body))}
}

// gitlabHeaders carries GitLab's secret token, as GitLab sends it.
func gitlabHeaders(secret, event string) []string {
	return []string{"X-Gitlab-Token: " + secret, "X-Gitlab-Event: " + event}
}

// sendgridHeaders signs body as SendGrid does at time at: ECDSA P-256
// over SHA-256 of the timestamp and the body, DER, base64.
func sendgridHeaders(key *ecdsa.PrivateKey, body string, at time.Time) []string {
	ts := unixString(at)
	sum := sha256.Sum256([]byte(ts + body))
	sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
	if err != nil {
		panic(err)
	}
	return []string{"X-Twilio-Email-Event-Webhook-Timestamp: " + ts,
		"X-Twilio-Email-Event-Webhook-Signature: " + base64.StdEncoding.EncodeToString(sig)}
}

// feishuBody encrypts the event plain as Feishu does under key: AES-256-CBC
// under SHA-256(key), a random IV first, PKCS#7 padding, base64, in
// {"encrypt": …}.
func feishuBody(key, plain string) string {
	sum := sha256.Sum256([]byte(key))
	block, err := aes.NewCipher(sum[:])
	if err != nil {
		panic(err)
	}
	pad := aes.BlockSize - len(plain)%aes.BlockSize
	data := append([]byte(plain), []byte(strings.Repeat(string(rune(pad)), pad))...)
	out := make([]byte, aes.BlockSize+len(data))
	if _, err := rand.Read(out[:aes.BlockSize]); err != nil {
		panic(err)
	}
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], data)
	b, _ := json.Marshal(map[string]string{"encrypt": base64.StdEncoding.EncodeToString(out)})
	return string(b)
}

// feishuHeaders signs body as Feishu does at time at: hex SHA-256 of the
// timestamp, the nonce, the Encrypt Key and the body.
func feishuHeaders(key, body string, at time.Time) []string {
	ts, nonce := unixString(at), "nonce-1234"
	sum := sha256.Sum256([]byte(ts + nonce + key + body))
	return []string{"X-Lark-Request-Timestamp: " + ts, "X-Lark-Request-Nonce: " + nonce, "X-Lark-Signature: " + hex.EncodeToString(sum[:])}
}

// googleJWKS is the key set of pvGoogleKey, as a JWKS file holds it.
func googleJWKS(t testing.TB) []byte { return jwksOf(t, &pvGoogleKey().PublicKey) }

// jwksOf is a key set of the RSA key pub, with the key id test-key-1.
func jwksOf(t testing.TB, pub *rsa.PublicKey) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "test-key-1",
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rtGoogleKeyB is another RSA key than pvGoogleKey.
var rtGoogleKeyB = sync.OnceValue(mustRSA)

// pubsubHeaders is the Authorization a Pub/Sub push subscription sends:
// a Google OIDC token (RS256) for audience, as service account email,
// issued at at for an hour.
func pubsubHeaders(audience, email string, at time.Time) []string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(map[string]string{"alg": "RS256", "kid": "test-key-1", "typ": "JWT"}) + "." + enc(map[string]any{
		"iss": "https://accounts.google.com", "aud": audience, "email": email, "email_verified": true,
		"sub": "1234567890", "iat": at.Unix(), "exp": at.Add(time.Hour).Unix(),
	})
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, pvGoogleKey(), crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return []string{"Authorization: Bearer " + signing + "." + base64.RawURLEncoding.EncodeToString(sig)}
}
