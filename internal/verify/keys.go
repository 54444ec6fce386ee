package verify

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// maxKeyText bounds one configured public key's text.
const maxKeyText = 16 << 10

// ParsePublicKey decodes one public key: PEM (PUBLIC KEY or CERTIFICATE),
// or hex or base64 (standard or URL alphabet, padded or not) of either a
// raw Ed25519 key (32 bytes), an uncompressed P-256 point (65 bytes) or a
// DER SubjectPublicKeyInfo. Errors say what was wrong, never echo the key
// (which is public, but may be a secret pasted by mistake).
func ParsePublicKey(s string) (crypto.PublicKey, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return nil, errors.New("empty (is its placeholder's variable set?)")
	case len(s) > maxKeyText:
		return nil, fmt.Errorf("longer than %d bytes", maxKeyText)
	case strings.HasPrefix(s, "-----BEGIN"):
		return parsePEMKey([]byte(s))
	}
	raw, err := decodeKeyText(s)
	if err != nil {
		return nil, err
	}
	switch {
	case len(raw) == ed25519.PublicKeySize:
		return ed25519.PublicKey(raw), nil
	case len(raw) == 65 && raw[0] == 4:
		k, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
		if err != nil {
			return nil, errors.New("65 bytes but not a P-256 point")
		}
		return k, nil
	}
	k, err := x509.ParsePKIXPublicKey(raw)
	if err != nil {
		return nil, errors.New("not an Ed25519 key, a P-256 point or a DER public key")
	}
	return k, nil
}

// decodeKeyText decodes hex, else base64 in any of its four spellings.
func decodeKeyText(s string) ([]byte, error) {
	if len(s)%2 == 0 && isHex(s) {
		return hex.DecodeString(s)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not hex, base64 or PEM")
}

// isHex reports whether s is non-empty and only hexadecimal digits.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if _, ok := unhex(s[i]); !ok {
			return false
		}
	}
	return s != ""
}

// parsePEMKey decodes exactly one PEM block holding a public key or a
// certificate.
func parsePEMKey(b []byte) (crypto.PublicKey, error) {
	block, rest := pem.Decode(b)
	if block == nil {
		return nil, errors.New("not valid PEM")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("more than one PEM block")
	}
	switch block.Type {
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, errors.New("PEM PUBLIC KEY does not parse")
		}
		return k, nil
	case "CERTIFICATE":
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, errors.New("PEM CERTIFICATE does not parse")
		}
		return c.PublicKey, nil
	}
	return nil, fmt.Errorf("PEM block %q (want PUBLIC KEY or CERTIFICATE)", block.Type)
}

// keyKind names a public key's type for error messages.
func keyKind(k crypto.PublicKey) string {
	switch k := k.(type) {
	case ed25519.PublicKey:
		return "an Ed25519 key"
	case *ecdsa.PublicKey:
		return "an ECDSA " + k.Curve.Params().Name + " key"
	case *rsa.PublicKey:
		return "an RSA key"
	}
	return fmt.Sprintf("a %T key", k)
}

// ed25519Keys decodes the configured public keys, which must be Ed25519.
func (b *builder) ed25519Keys() ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	err := b.eachPublicKey(func(i int, k crypto.PublicKey) error {
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return fmt.Errorf("public_keys[%d]: %s; %s signs with Ed25519", i, keyKind(k), b.p.Title)
		}
		out = append(out, ek)
		return nil
	})
	return out, err
}

// ecdsaKeys decodes the configured public keys, which must be ECDSA P-256.
func (b *builder) ecdsaKeys() ([]*ecdsa.PublicKey, error) {
	var out []*ecdsa.PublicKey
	err := b.eachPublicKey(func(i int, k crypto.PublicKey) error {
		ek, ok := k.(*ecdsa.PublicKey)
		if !ok || ek.Curve != elliptic.P256() {
			return fmt.Errorf("public_keys[%d]: %s; %s signs with ECDSA P-256", i, keyKind(k), b.p.Title)
		}
		out = append(out, ek)
		return nil
	})
	return out, err
}

// eachPublicKey decodes every configured public key and passes it to fn.
func (b *builder) eachPublicKey(fn func(i int, k crypto.PublicKey) error) error {
	keys := b.cfg.PublicKeys
	switch {
	case len(keys) == 0:
		return errors.New("public_keys: at least one public key is required")
	case len(keys) > MaxSecrets:
		return fmt.Errorf("public_keys: at most %d allowed", MaxSecrets)
	}
	for i, s := range keys {
		if IsSecretPlaceholder(s) {
			return fmt.Errorf("public_keys[%d]: placeholder was not expanded", i)
		}
		k, err := ParsePublicKey(s)
		if err != nil {
			return fmt.Errorf("public_keys[%d]: %v", i, err)
		}
		if err := fn(i, k); err != nil {
			return err
		}
	}
	return nil
}
