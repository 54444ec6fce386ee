package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"time"
)

// maxPubSigLen bounds a decoded public-key signature (an ECDSA P-256 DER
// signature is at most 72 bytes, Ed25519 64).
const maxPubSigLen = 80

// pubSpec declares a public-key provider: the signature header and its
// encoding, the signed-time header, and the separator between the time
// and the body in the signed message (time + sep + body).
type pubSpec struct {
	sigHeader string
	tsHeader  string
	enc       encoding
	sep       string
}

// pubScheme verifies time+sep+body under any of the configured keys.
type pubScheme struct {
	spec  pubSpec
	tol   time.Duration
	check func(msg, sig []byte) bool
}

// ed25519Provider builds an Ed25519 provider declared by spec.
func ed25519Provider(spec pubSpec) func(b *builder) (scheme, error) {
	return func(b *builder) (scheme, error) {
		keys, err := b.ed25519Keys()
		if err != nil {
			return nil, err
		}
		return b.pubScheme(spec, func(msg, sig []byte) bool {
			ok := false
			for _, k := range keys {
				if ed25519.Verify(k, msg, sig) {
					ok = true
				}
			}
			return ok
		})
	}
}

// ecdsaProvider builds an ECDSA P-256 (SHA-256, ASN.1 DER signature)
// provider declared by spec.
func ecdsaProvider(spec pubSpec) func(b *builder) (scheme, error) {
	return func(b *builder) (scheme, error) {
		keys, err := b.ecdsaKeys()
		if err != nil {
			return nil, err
		}
		return b.pubScheme(spec, func(msg, sig []byte) bool {
			digest := sha256.Sum256(msg)
			ok := false
			for _, k := range keys {
				if ecdsa.VerifyASN1(k, digest[:], sig) {
					ok = true
				}
			}
			return ok
		})
	}
}

// pubScheme finishes a public-key scheme.
func (b *builder) pubScheme(spec pubSpec, check func(msg, sig []byte) bool) (scheme, error) {
	spec.sigHeader, spec.tsHeader = mustHeader(spec.sigHeader), mustHeader(spec.tsHeader)
	tol, err := b.tolerance()
	if err != nil {
		return nil, err
	}
	return &pubScheme{spec: spec, tol: tol, check: check}, nil
}

// offered implements offerer.
func (s *pubScheme) offered() []string { return []string{s.spec.sigHeader} }

// verify implements scheme.
func (s *pubScheme) verify(c *call) error {
	h := c.header()
	v, err := requireHeader(h, s.spec.sigHeader, ReasonMissingSignature)
	if err != nil {
		return err
	}
	ts, err := requireHeader(h, s.spec.tsHeader, ReasonMissingTimestamp)
	if err != nil {
		return err
	}
	sig, ok := decodeSig(v, s.spec.enc)
	if !ok {
		return fail(ReasonMalformedSignature, s.spec.sigHeader)
	}
	if err := checkTimestamp(ts, s.spec.tsHeader, c.now, s.tol); err != nil {
		return err
	}
	msg := make([]byte, 0, len(ts)+len(s.spec.sep)+len(c.body()))
	msg = append(append(append(msg, ts...), s.spec.sep...), c.body()...)
	if !s.check(msg, sig) {
		return fail(ReasonBadSignature, s.spec.sigHeader)
	}
	return nil
}

// decodeSig decodes a public-key signature in enc (hex, or base64 in the
// standard alphabet, padding optional), at most maxPubSigLen bytes.
func decodeSig(v string, enc encoding) ([]byte, bool) {
	var (
		b   []byte
		err error
	)
	switch enc {
	case encHex:
		if len(v) > 2*maxPubSigLen {
			return nil, false
		}
		b, err = hex.DecodeString(v)
	default:
		if len(v) > base64.StdEncoding.EncodedLen(maxPubSigLen) {
			return nil, false
		}
		b, err = base64.StdEncoding.DecodeString(v)
		if err != nil {
			b, err = base64.RawStdEncoding.DecodeString(v)
		}
	}
	return b, err == nil && len(b) > 0
}
