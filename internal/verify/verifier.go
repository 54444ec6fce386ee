package verify

import (
	"fmt"
	"net/http"
	"time"
)

// Limits and defaults.
const (
	// DefaultTolerance is the timestamp tolerance when Config.Tolerance is 0.
	DefaultTolerance = 300 * time.Second
	// MinSecretLen is the shortest accepted secret (decoded key for standard).
	MinSecretLen = 16
	// MaxSecrets bounds the secrets per block; each costs one HMAC per request.
	MaxSecrets = 8
	// MaxSignatures bounds the signature entries considered in one header.
	MaxSignatures = 16
	// MaxDeliveryIDLen is the longest delivery id returned; longer ids (or
	// ids with bytes outside printable ASCII) are not returned.
	MaxDeliveryIDLen = 256
)

// Result is the outcome of a successful verification.
type Result struct {
	// DeliveryID is the provider's delivery id, for use as the idempotency
	// key when the request has none; "" when the scheme or request has none.
	DeliveryID string
	// Challenge is set for a signed Slack url_verification request: answer
	// 200 {"challenge": Challenge} and do not dispatch.
	Challenge string
}

// scheme is one provider's signature format.
type scheme interface {
	// verify checks h and body at now against the keys in m.
	verify(m *macSet, h http.Header, body []byte, now time.Time) (Result, error)
}

// Verifier checks requests against one Config. It is immutable after New
// and safe for concurrent use. Formatting it never shows a secret.
type Verifier struct {
	name   string
	scheme scheme
	macs   *macSet
	// offered names the headers whose presence means a signature is
	// offered (canonical forms).
	offered []string
}

// New validates cfg and builds its Verifier. Errors name the offending
// field (e.g. "secrets[1]: shorter than 16 bytes") and never include a
// secret.
func New(cfg Config) (*Verifier, error) {
	var (
		s   scheme
		alg = algSHA256
		err error
	)
	switch cfg.Scheme {
	case SchemeGitHub:
		s, err = newGitHub(cfg)
	case SchemeStripe:
		s, err = newStripe(cfg)
	case SchemeSlack:
		s, err = newSlack(cfg)
	case SchemeStandard:
		s, err = newStandard(cfg)
	case SchemeHMAC:
		var g *genericScheme
		g, alg, err = newGeneric(cfg)
		s = g
	case "":
		return nil, fmt.Errorf("verify: scheme: required (github, stripe, slack, standard or hmac)")
	default:
		return nil, fmt.Errorf("verify: scheme: unknown %q (want github, stripe, slack, standard or hmac)", cfg.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", cfg.Scheme, err)
	}
	keys, err := decodeSecrets(cfg.Secrets, cfg.Scheme == SchemeStandard)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", cfg.Scheme, err)
	}
	offered := SignatureHeaders(cfg)
	if cfg.Scheme == SchemeGitHub {
		offered = offered[:1] // X-Hub-Signature (SHA-1) is never verified
	}
	return &Verifier{name: cfg.Scheme, scheme: s, macs: newMACSet(alg, keys), offered: offered}, nil
}

// Verify checks the request headers h and raw body at time now. A failure
// is an *Error; the caller answers 401.
func (v *Verifier) Verify(h http.Header, body []byte, now time.Time) (Result, error) {
	return v.scheme.verify(v.macs, h, body, now)
}

// Scheme returns the scheme name the Verifier checks.
func (v *Verifier) Scheme() string { return v.name }

// String describes v without any secret.
func (v Verifier) String() string {
	return fmt.Sprintf("verify.Verifier{Scheme:%q Secrets:%d}", v.name, v.macs.keys())
}

// GoString describes v for %#v without any secret.
func (v Verifier) GoString() string { return v.String() }

// Offered reports, from the headers alone, whether h carries a signature
// for v's scheme: nil when it does, else the *Error Verify would return. A
// request without one can be refused before its body is read.
func (v *Verifier) Offered(h http.Header) error {
	for _, name := range v.offered {
		if vals := h[name]; len(vals) > 0 && trimOWS(vals[0]) != "" {
			return nil
		}
	}
	return fail(ReasonMissingSignature, v.offered[0])
}
