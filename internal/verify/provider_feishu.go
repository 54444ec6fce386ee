package verify

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"time"
)

// Feishu/Lark event headers.
const (
	larkSignature = "X-Lark-Signature"
	larkTimestamp = "X-Lark-Request-Timestamp"
	larkNonce     = "X-Lark-Request-Nonce"
)

// maxEncrypted bounds the "encrypt" member decrypted.
const maxEncrypted = 4 << 20

// feishuScheme checks Feishu/Lark events: with an Encrypt Key, the
// X-Lark-Signature (hex SHA-256 of timestamp + nonce + key + body) and the
// AES-256-CBC encrypted body; in every case the Verification Token in the
// (decrypted) body.
type feishuScheme struct {
	token  secretSum
	key    string       // the Encrypt Key, "" when events are plain
	block  cipher.Block // AES-256 under SHA-256(key)
	tol    time.Duration
	keySum [sha256.Size]byte
	hasKey bool
}

// feishuProvider registers Feishu or Lark (one API, two brands).
func feishuProvider(name, title, doc string) *Provider {
	return &Provider{
		Name:             name,
		Title:            title,
		Family:           FamilyDigest,
		Signature:        "X-Lark-Signature: <hex SHA-256(timestamp + nonce + encrypt_key + body)>; body AES-256-CBC under SHA-256(encrypt_key); token in the body",
		Doc:              doc,
		Notes:            "verify_token is the app's Verification Token, checked in every event; encrypt_key is its Encrypt Key. Without encrypt_key events are neither signed nor encrypted (only the token is checked): set one. The decrypted event is what the mapping sees and forward mode sends. url_verification is not signed by Feishu; it is answered only with the right token.",
		SignatureHeaders: []string{larkSignature},
		Handshake:        "url_verification (token checked; decrypted when encrypted) → {\"challenge\"}",
		DeliveryID:       oneOf(fromJSON("header.event_id"), fromJSON("uuid")),
		Event:            oneOf(fromJSON("header.event_type"), fromJSON("event.type")),
		Template:         "Feishu {{event}} from {{payload.event.sender.sender_id.open_id}}: {{payload.event.message.content}}",
		Tolerance:        DefaultTolerance,
		Words:            []string{"verify_token", "encrypt_key"},
		Required:         []string{"verify_token"},
		SignsBody:        true,
		build:            newFeishu,
	}
}

func init() {
	register(feishuProvider("feishu", "Feishu", "https://open.feishu.cn/document/ukTMukTMukTM/uYDNxYjL2QTM24iN0EjN/event-subscription-configure-/encrypt-key-encryption-configuration-case"))
	register(feishuProvider("lark", "Lark", "https://open.larksuite.com/document/ukTMukTMukTM/uYDNxYjL2QTM24iN0EjN/event-subscription-configure-/encrypt-key-encryption-configuration-case"))
}

// newFeishu builds a feishuScheme.
func newFeishu(b *builder) (scheme, error) {
	tok, err := b.verifyToken()
	if err != nil {
		return nil, err
	}
	s := &feishuScheme{token: tok}
	if b.cfg.EncryptKey != "" {
		if _, err := b.secretWord("encrypt_key", b.cfg.EncryptKey, 8); err != nil {
			return nil, err
		}
		s.key, s.hasKey = b.cfg.EncryptKey, true
		s.keySum = sha256.Sum256([]byte(s.key))
		if s.block, err = aes.NewCipher(s.keySum[:]); err != nil {
			return nil, err
		}
		if s.tol, err = b.tolerance(); err != nil {
			return nil, err
		}
	} else if b.cfg.Tolerance != 0 {
		return nil, errors.New("tolerance: needs encrypt_key (only signed events carry a time)")
	}
	return s, nil
}

// offered implements offerer: with an Encrypt Key events are signed.
func (s *feishuScheme) offered() []string {
	if s.hasKey {
		return []string{larkSignature}
	}
	return nil
}

// open returns the request's event as JSON: decrypted when it is.
func (s *feishuScheme) open(c *call) ([]byte, error) {
	enc := jsonValue(c.body(), "encrypt")
	if enc == nil {
		if s.hasKey {
			return nil, fail(ReasonMalformedBody, "")
		}
		return c.body(), nil
	}
	if !s.hasKey {
		return nil, &PayloadError{Reason: "encrypted event, but no encrypt_key is configured"}
	}
	plain, err := s.decrypt(jsonText(enc))
	if err != nil {
		return nil, fail(ReasonMalformedBody, "")
	}
	c.setPayload(plain)
	return plain, nil
}

// decrypt decrypts a Feishu "encrypt" value: base64 of a 16-byte IV and
// AES-256-CBC ciphertext with PKCS#7 padding; the plaintext must be JSON.
func (s *feishuScheme) decrypt(b64 string) ([]byte, error) {
	if len(b64) > maxEncrypted {
		return nil, errors.New("too long")
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(data) < 2*aes.BlockSize || len(data)%aes.BlockSize != 0 {
		return nil, errors.New("malformed")
	}
	iv, ct := data[:aes.BlockSize], data[aes.BlockSize:]
	out := make([]byte, len(ct))
	cipher.NewCBCDecrypter(s.block, iv).CryptBlocks(out, ct)
	n := int(out[len(out)-1])
	if n == 0 || n > aes.BlockSize || n > len(out) {
		return nil, errors.New("padding")
	}
	for _, p := range out[len(out)-n:] {
		if int(p) != n {
			return nil, errors.New("padding")
		}
	}
	return out[:len(out)-n], nil
}

// checkToken compares the event's Verification Token (v2: header.token,
// v1: token).
func (s *feishuScheme) checkToken(doc []byte) error {
	tok := jsonField(doc, "header", "token")
	if tok == "" {
		tok = jsonField(doc, "token")
	}
	if tok == "" {
		return fail(ReasonMissingSignature, "")
	}
	if !s.token.matches(tok) {
		return fail(ReasonBadToken, "")
	}
	return nil
}

// verify implements scheme.
func (s *feishuScheme) verify(c *call) error {
	if s.hasKey {
		h := c.header()
		sig, err := requireHeader(h, larkSignature, ReasonMissingSignature)
		if err != nil {
			return err
		}
		ts, err := requireHeader(h, larkTimestamp, ReasonMissingTimestamp)
		if err != nil {
			return err
		}
		nonce, err := requireHeader(h, larkNonce, ReasonMissingSignature)
		if err != nil {
			return err
		}
		want, err := hex.DecodeString(sig)
		if err != nil || len(want) != sha256.Size {
			return fail(ReasonMalformedSignature, larkSignature)
		}
		if err := checkTimestamp(ts, larkTimestamp, c.now, s.tol); err != nil {
			return err
		}
		d := sha256.New()
		d.Write([]byte(ts))
		d.Write([]byte(nonce))
		d.Write([]byte(s.key))
		d.Write(c.body())
		if subtle.ConstantTimeCompare(d.Sum(nil), want) != 1 {
			return fail(ReasonBadSignature, larkSignature)
		}
	}
	doc, err := s.open(c)
	if err != nil {
		return err
	}
	return s.checkToken(doc)
}

// handshake implements handshaker: url_verification, which Feishu does
// not sign, answered only with the right token.
func (s *feishuScheme) handshake(c *call) (*Answer, error) {
	if !isPost(c) {
		return nil, errNotHandshake
	}
	doc, err := s.open(c)
	if err != nil || jsonField(doc, "type") != "url_verification" {
		return nil, errNotHandshake
	}
	if err := s.checkToken(doc); err != nil {
		return nil, err
	}
	ch := cleanChallenge(jsonField(doc, "challenge"))
	if ch == "" {
		return nil, fail(ReasonBadChallenge, "")
	}
	return jsonAnswer("feishu url_verification", "challenge", ch), nil
}
