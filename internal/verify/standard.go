package verify

import (
	"net/http"
	"strings"
	"time"
)

// standardHeaders names the three headers of one Standard Webhooks header
// family (canonical forms).
type standardHeaders struct{ id, timestamp, signature string }

// The Standard Webhooks header names and Svix's older equivalents.
const (
	webhookIDHeader        = "Webhook-Id"
	webhookTimestampHeader = "Webhook-Timestamp"
	webhookSignatureHeader = "Webhook-Signature"
	svixIDHeader           = "Svix-Id"
	svixTimestampHeader    = "Svix-Timestamp"
	svixSignatureHeader    = "Svix-Signature"
)

// standardScheme checks Standard Webhooks (and Svix): webhook-signature
// holds space-separated "v1,<base64>" entries, each an HMAC-SHA256 of
// "<webhook-id>.<webhook-timestamp>.<body>" under the base64 key of the
// whsec_ secret. The signed webhook-id is the delivery id.
type standardScheme struct{ tol time.Duration }

// newStandard validates cfg for the standard scheme.
func newStandard(cfg Config) (standardScheme, error) {
	tol, err := schemeTolerance(cfg)
	if err != nil {
		return standardScheme{}, err
	}
	return standardScheme{tol: tol}, rejectGenericFields(cfg)
}

// family picks the webhook-* headers when any of them is present, else
// the svix-* ones; the two families are never mixed.
func family(h http.Header) standardHeaders {
	if len(h.Values(webhookIDHeader)) > 0 || len(h.Values(webhookTimestampHeader)) > 0 ||
		len(h.Values(webhookSignatureHeader)) > 0 {
		return standardHeaders{webhookIDHeader, webhookTimestampHeader, webhookSignatureHeader}
	}
	return standardHeaders{svixIDHeader, svixTimestampHeader, svixSignatureHeader}
}

// verify implements scheme.
func (s standardScheme) verify(m *macSet, h http.Header, body []byte, now time.Time) (Result, error) {
	names := family(h)
	sig, err := requireHeader(h, names.signature, ReasonMissingSignature)
	if err != nil {
		return Result{}, err
	}
	id, err := requireHeader(h, names.id, ReasonMissingID)
	if err != nil {
		return Result{}, err
	}
	ts, err := requireHeader(h, names.timestamp, ReasonMissingTimestamp)
	if err != nil {
		return Result{}, err
	}
	var c candidates
	if r := parseStandard(sig, m.size, &c); r != "" {
		return Result{}, fail(r, names.signature)
	}
	if err := checkTimestamp(ts, names.timestamp, now, s.tol); err != nil {
		return Result{}, err
	}
	if !m.match(&c, []byte(id), dot, []byte(ts), dot, body) {
		return Result{}, fail(ReasonBadSignature, names.signature)
	}
	return Result{DeliveryID: cleanID(id)}, nil
}

// parseStandard parses a webhook-signature value: space-separated
// "<version>,<signature>" entries; v1 entries are base64 MACs, other
// versions (such as v1a) are skipped. It returns a Reason on failure,
// ReasonUnsupportedVersion when no v1 entry is present.
func parseStandard(v string, size int, c *candidates) string {
	entries := 0
	for entry := range strings.SplitSeq(v, " ") {
		if entry == "" {
			continue
		}
		if entries++; entries > maxEntries {
			return ReasonTooManySignatures
		}
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version == "" {
			return ReasonMalformedSignature
		}
		if version != "v1" {
			continue
		}
		if r := c.add(encBase64, size, sig); r != "" {
			return r
		}
	}
	if c.n == 0 {
		return ReasonUnsupportedVersion
	}
	return ""
}
