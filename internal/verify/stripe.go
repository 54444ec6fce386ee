package verify

import (
	"net/http"
	"strings"
	"time"
)

// stripeSignatureHeader is Stripe's signature header (canonical form).
const stripeSignatureHeader = "Stripe-Signature"

// maxEntries bounds the comma- or space-separated entries parsed in one
// signature header, whatever their version.
const maxEntries = 2 * MaxSignatures

// stripeScheme checks Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]
// where v1 is the HMAC-SHA256 of "<t>.<body>" under the whsec_ secret
// (used verbatim, not decoded). The delivery id is the event's "id".
type stripeScheme struct{ tol time.Duration }

// newStripe validates cfg for the stripe scheme.
func newStripe(cfg Config) (stripeScheme, error) {
	tol, err := schemeTolerance(cfg)
	if err != nil {
		return stripeScheme{}, err
	}
	return stripeScheme{tol: tol}, rejectGenericFields(cfg)
}

// verify implements scheme.
func (s stripeScheme) verify(m *macSet, h http.Header, body []byte, now time.Time) (Result, error) {
	v, err := requireHeader(h, stripeSignatureHeader, ReasonMissingSignature)
	if err != nil {
		return Result{}, err
	}
	var c candidates
	ts, r := parseStripe(v, m.size, &c)
	if r != "" {
		return Result{}, fail(r, stripeSignatureHeader)
	}
	if err := checkTimestamp(ts, stripeSignatureHeader, now, s.tol); err != nil {
		return Result{}, err
	}
	if !m.match(&c, []byte(ts), dot, body) {
		return Result{}, fail(ReasonBadSignature, stripeSignatureHeader)
	}
	return Result{DeliveryID: cleanID(readBodyFields(body).ID)}, nil
}

// dot separates the parts of several schemes' signed content.
var dot = []byte{'.'}

// parseStripe parses a Stripe-Signature value: comma-separated key=value
// entries with exactly one t and at least one v1 (other keys, such as v0,
// are ignored). It returns t as sent, or a Reason on failure.
func parseStripe(v string, size int, c *candidates) (ts, reason string) {
	entries := 0
	for item := range strings.SplitSeq(v, ",") {
		if entries++; entries > maxEntries {
			return "", ReasonTooManySignatures
		}
		key, val, ok := strings.Cut(trimOWS(item), "=")
		if !ok || key == "" || val == "" {
			return "", ReasonMalformedSignature
		}
		switch key {
		case "t":
			if ts != "" {
				return "", ReasonMalformedSignature
			}
			ts = val
		case "v1":
			if r := c.add(encHex, size, val); r != "" {
				return "", r
			}
		}
	}
	switch {
	case ts == "":
		return "", ReasonMalformedSignature
	case c.n == 0:
		return "", ReasonUnsupportedVersion
	}
	return ts, ""
}
