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
type standardScheme struct {
	m   *macSet
	tol time.Duration
}

// standardProvider builds a Standard Webhooks provider.
func standardProvider(b *builder) (scheme, error) {
	tol, err := b.tolerance()
	if err != nil {
		return nil, err
	}
	m, err := b.macSet(algSHA256, keyWhsec)
	if err != nil {
		return nil, err
	}
	return &standardScheme{m: m, tol: tol}, nil
}

// offered implements offerer.
func (s *standardScheme) offered() []string {
	return []string{webhookSignatureHeader, svixSignatureHeader}
}

// standardID is the delivery id source of Standard Webhooks providers.
var standardID = fromFunc("header webhook-id (or svix-id)", func(c *call) string {
	v, _ := headerValue(c.header(), family(c.header()).id)
	return v
})

// standardHeadersList are the credentials headers of Standard Webhooks
// providers.
var standardHeadersList = []string{webhookSignatureHeader, svixSignatureHeader}

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
func (s *standardScheme) verify(c *call) error {
	h := c.header()
	names := family(h)
	sig, err := requireHeader(h, names.signature, ReasonMissingSignature)
	if err != nil {
		return err
	}
	id, err := requireHeader(h, names.id, ReasonMissingID)
	if err != nil {
		return err
	}
	ts, err := requireHeader(h, names.timestamp, ReasonMissingTimestamp)
	if err != nil {
		return err
	}
	var cand candidates
	if r := parseStandard(sig, s.m.size, &cand); r != "" {
		return fail(r, names.signature)
	}
	if err := checkTimestamp(ts, names.timestamp, c.now, s.tol); err != nil {
		return err
	}
	if !s.m.match(&cand, []byte(id), dot, []byte(ts), dot, c.body()) {
		return fail(ReasonBadSignature, names.signature)
	}
	return nil
}

// dot separates the parts of several schemes' signed content.
var dot = []byte{'.'}

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
