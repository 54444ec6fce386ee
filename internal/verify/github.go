package verify

import (
	"errors"
	"net/http"
	"strings"
	"time"
)

// GitHub headers (canonical forms).
const (
	githubSignatureHeader = "X-Hub-Signature-256"
	githubDeliveryHeader  = "X-Github-Delivery"
	githubPrefix          = "sha256="
)

// githubScheme checks X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of body>.
// GitHub signs no timestamp and not its delivery id, so the id only
// deduplicates honest redeliveries.
type githubScheme struct{}

// newGitHub validates cfg for the github scheme.
func newGitHub(cfg Config) (githubScheme, error) {
	if cfg.Tolerance != 0 {
		return githubScheme{}, errors.New("tolerance: github signatures carry no timestamp")
	}
	return githubScheme{}, rejectGenericFields(cfg)
}

// verify implements scheme.
func (githubScheme) verify(m *macSet, h http.Header, body []byte, _ time.Time) (Result, error) {
	v, err := requireHeader(h, githubSignatureHeader, ReasonMissingSignature)
	if err != nil {
		return Result{}, err
	}
	var c candidates
	if r := parsePrefixed(v, githubPrefix, encHex, m.size, &c); r != "" {
		return Result{}, fail(r, githubSignatureHeader)
	}
	if !m.match(&c, body) {
		return Result{}, fail(ReasonBadSignature, githubSignatureHeader)
	}
	return Result{DeliveryID: deliveryID(h, githubDeliveryHeader)}, nil
}

// parsePrefixed parses a single "<prefix><encoded signature>" header value
// into c, returning a Reason on failure.
func parsePrefixed(v, prefix string, enc encoding, size int, c *candidates) string {
	sig, ok := strings.CutPrefix(v, prefix)
	if !ok {
		return ReasonMalformedSignature
	}
	return c.add(enc, size, sig)
}
