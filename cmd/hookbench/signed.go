package main

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rows (s), (t) and (u) send deliveries a provider signs instead of the
// hook token: GitHub's HMAC-SHA256, Discord's Ed25519 and SendGrid's
// ECDSA P-256, each to a mapping with the provider's verify block, so
// that their CPU per request, beside row (c)'s, is what a provider
// signature costs through Caddy. Row (v) is their twin with the hook
// token (the same mapping without verify): the difference of each to
// (v) is its signature's. Each request carries a fresh Idempotency-Key
// (the providers' delivery ids would make every repeat a replay): every
// one is verified and dispatched.

// signers are the row's provider keys, made once per run.
type signers struct {
	token        string // the hook token (row v)
	githubSecret string
	discord      ed25519.PrivateKey
	sendgrid     *ecdsa.PrivateKey
}

// newSigners makes the keys of a run.
func newSigners(token string) (*signers, error) {
	_, d, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	sg, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &signers{token: token, githubSecret: randomToken(), discord: d, sendgrid: sg}, nil
}

// placeholders are what the sites' verify blocks read: {github_secret},
// {discord_key} (hex), {sendgrid_key} (base64 DER).
func (s *signers) placeholders() []string {
	der, _ := x509.MarshalPKIXPublicKey(&s.sendgrid.PublicKey)
	return []string{"{github_secret}", s.githubSecret,
		"{discord_key}", hex.EncodeToString(s.discord.Public().(ed25519.PublicKey)),
		"{sendgrid_key}", base64.StdEncoding.EncodeToString(der)}
}

// Bodies of the signed rows.
const (
	discordBody = `{"id":"1203958220","type":2,"token":"aW50ZXJhY3Rpb24","data":{"name":"deploy","options":[{"name":"build","value":"1234"}]},` +
		`"member":{"user":{"username":"doc"}}}`
	sendgridBody = `[{"email":"doc@example.com","event":"bounce","reason":"mailbox full","sg_event_id":"sg-1","timestamp":1700000000}]`
)

// signedMapping is a mapping on path checking provider's signature with
// verify's lines (no verify block when provider is ""); the replay
// window is an hour, so that the requests signed when the run starts
// stay valid through it.
func signedMapping(path, provider, lines string) string {
	verify := ""
	if provider != "" {
		verify = fmt.Sprintf("\n\t\t\tverify %s {\n\t\t\t\t%s\n\t\t\t}", provider, lines)
	}
	return fmt.Sprintf("mapping %[1]s {\n\t\t\tmatch_path %[1]s%[2]s\n\t\t\tmessage_template \"{{event}} from a signed delivery\"\n\t\t}", path, verify)
}

// signedHeaders are the headers provider sends with body at now.
func (s *signers) signedHeaders(provider, body string, now time.Time) (string, error) {
	ts := strconv.FormatInt(now.Unix(), 10)
	switch provider {
	case "token":
		return "Authorization: Bearer " + s.token + "\r\n", nil
	case "github":
		m := hmac.New(sha256.New, []byte(s.githubSecret))
		m.Write([]byte(body))
		return "X-GitHub-Event: pull_request\r\nX-Hub-Signature-256: sha256=" + hex.EncodeToString(m.Sum(nil)) + "\r\n", nil
	case "discord":
		return "X-Signature-Timestamp: " + ts + "\r\nX-Signature-Ed25519: " + hex.EncodeToString(ed25519.Sign(s.discord, []byte(ts+body))) + "\r\n", nil
	case "sendgrid":
		sum := sha256.Sum256([]byte(ts + body))
		sig, err := ecdsa.SignASN1(rand.Reader, s.sendgrid, sum[:])
		if err != nil {
			return "", err
		}
		return "X-Twilio-Email-Event-Webhook-Timestamp: " + ts + "\r\nX-Twilio-Email-Event-Webhook-Signature: " + base64.StdEncoding.EncodeToString(sig) + "\r\n", nil
	}
	return "", fmt.Errorf("no signer for %q", provider)
}

// signedRequest is row r's request for host, signed as r.signed signs it,
// with an Idempotency-Key of keyWidth digits at the returned offset
// (rewritten per request).
func (s *signers) signedRequest(r rowDef, host string, now time.Time) ([]byte, int, error) {
	sig, err := s.signedHeaders(r.signed, r.body, now)
	if err != nil {
		return nil, 0, err
	}
	b := make([]byte, 0, 512+len(r.body))
	b = append(b, "POST "+r.path+" HTTP/1.1\r\nHost: "+host+"\r\nContent-Type: application/json\r\n"+sig+"Idempotency-Key: "...)
	at := len(b)
	b = append(b, strings.Repeat("0", keyWidth)+"\r\n"...)
	b = append(b, "Content-Length: "+strconv.Itoa(len(r.body))+"\r\n\r\n"+r.body...)
	return b, at, nil
}
