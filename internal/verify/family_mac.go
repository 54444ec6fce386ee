package verify

import (
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"time"
)

// partKind says what one piece of a provider's signed content is.
type partKind int

// Signed content parts.
const (
	partLit       partKind = iota // fixed text
	partBody                      // the raw body
	partTimestamp                 // the timestamp as sent
	partHeader                    // a header's value as sent (required)
	partURL                       // the public URL (see PublicURL)
	partMethod                    // the request method
	partForm                      // the form fields, sorted: name value … (Twilio, Mandrill)
)

// part is one piece of signed content.
type part struct {
	kind    partKind
	lit     []byte
	header  string              // partHeader
	missing string              // partHeader: the Reason when absent
	url     func(string) string // partURL: a provider's rewrite of the URL
}

// Constructors of signed content parts.
func lit(s string) part                   { return part{kind: partLit, lit: []byte(s)} }
func bodyPart() part                      { return part{kind: partBody} }
func tsPart() part                        { return part{kind: partTimestamp} }
func methodPart() part                    { return part{kind: partMethod} }
func formPart() part                      { return part{kind: partForm} }
func urlPart(fn func(string) string) part { return part{kind: partURL, url: fn} }
func headerPart(name, missing string) part {
	return part{kind: partHeader, header: mustHeader(name), missing: missing}
}

// tsFrom says where a scheme's signed time is.
type tsFrom int

// Timestamp sources.
const (
	tsNone   tsFrom = iota
	tsHeader        // its own header
	tsList          // an entry of the signature header (t=, ts=, timestamp=)
	tsBody          // a member of the JSON body, checked after the MAC
)

// tsUnit is how a signed time is written.
type tsUnit int

// Timestamp formats.
const (
	unitSeconds tsUnit = iota // unix seconds
	unitMillis                // unix milliseconds
	unitRFC3339               // RFC 3339, fractional seconds allowed
)

// listSpec describes a signature header of separated key=value entries.
type listSpec struct {
	sep    string // "," or ";"
	tsKey  string // the timestamp entry's key, "" when none
	sigKey string // the signatures' key (repeatable)
}

// macSpec declares an HMAC provider: which headers carry which encoding
// of the HMAC of which content, and where the signed time is.
type macSpec struct {
	alg      algorithm
	key      keyDecode
	headers  []string // signature headers; with several, each present one carries one signature (DocuSign, Box)
	prefix   string   // single-signature form: "<prefix><signature>"
	list     *listSpec
	enc      encoding
	parts    []part
	tsFrom   tsFrom
	tsHeader string
	tsPath   []string
	tsUnit   tsUnit
	// check, when set, runs before the MAC (Twilio's bodySHA256).
	check func(c *call) error
}

// macScheme is a built macSpec.
type macScheme struct {
	spec macSpec
	m    *macSet
	tol  time.Duration
}

// macProvider is the build function of a provider declared by spec.
func macProvider(spec macSpec) func(b *builder) (scheme, error) {
	return func(b *builder) (scheme, error) { return b.macScheme(spec) }
}

// bodyMAC is the build function of the commonest provider: one header
// holding prefix + the enc-encoded HMAC (alg) of the body.
func bodyMAC(alg algorithm, header, prefix string, enc encoding) func(b *builder) (scheme, error) {
	return macProvider(macSpec{alg: alg, headers: []string{header}, prefix: prefix, enc: enc, parts: []part{bodyPart()}})
}

// macScheme builds spec from b's config.
func (b *builder) macScheme(spec macSpec) (*macScheme, error) {
	if spec.alg.new == nil {
		spec.alg = algSHA256
	}
	for i, h := range spec.headers {
		spec.headers[i] = mustHeader(h)
	}
	if spec.tsHeader != "" {
		spec.tsHeader = mustHeader(spec.tsHeader)
	}
	m, err := b.macSet(spec.alg, spec.key)
	if err != nil {
		return nil, err
	}
	s := &macScheme{spec: spec, m: m}
	if spec.tsFrom != tsNone {
		if s.tol, err = b.tolerance(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// offered implements offerer.
func (s *macScheme) offered() []string { return s.spec.headers }

// maxParts bounds a spec's parts (and so the header values kept).
const maxParts = 8

// verify implements scheme.
func (s *macScheme) verify(c *call) error {
	h := c.header()
	var (
		valBuf  [4]string
		sigVals = valBuf[:0]
		sigName string
	)
	for _, name := range s.spec.headers {
		v, err := headerValue(h, name)
		switch {
		case err != nil:
			return err
		case v == "":
			continue
		case len(v) > maxHeaderLen:
			return fail(ReasonMalformedSignature, name)
		}
		if len(sigVals) < len(valBuf) {
			sigVals = append(sigVals, v)
		}
		if sigName == "" {
			sigName = name
		}
	}
	if len(sigVals) == 0 {
		return fail(ReasonMissingSignature, s.spec.headers[0])
	}
	var ts string
	if s.spec.tsFrom == tsHeader {
		var err error
		if ts, err = requireHeader(h, s.spec.tsHeader, ReasonMissingTimestamp); err != nil {
			return err
		}
	}
	var hdrVals [maxParts]string
	for i, p := range s.spec.parts {
		if p.kind == partHeader {
			v, err := requireHeader(h, p.header, p.missing)
			if err != nil {
				return err
			}
			hdrVals[i] = v
		}
	}
	var cand candidates
	for _, v := range sigVals {
		if s.spec.list != nil {
			t, r := parseList(v, s.spec.list, s.spec.enc, s.m.size, &cand)
			if r != "" {
				return fail(r, sigName)
			}
			ts = t
			continue
		}
		if r := parsePrefixed(v, s.spec.prefix, s.spec.enc, s.m.size, &cand); r != "" {
			return fail(r, sigName)
		}
	}
	if s.spec.tsFrom == tsHeader || s.spec.tsFrom == tsList {
		at := s.spec.tsHeader
		if s.spec.tsFrom == tsList {
			at = sigName
		}
		if err := checkTime(ts, at, s.spec.tsUnit, c.now, s.tol); err != nil {
			return err
		}
	}
	if s.spec.check != nil {
		if err := s.spec.check(c); err != nil {
			return err
		}
	}
	var buf [maxParts][]byte
	content, err := s.content(c, buf[:0], ts, &hdrVals)
	if err != nil {
		return err
	}
	if !s.m.match(&cand, content...) {
		return fail(ReasonBadSignature, sigName)
	}
	if s.spec.tsFrom == tsBody {
		if err := checkTime(jsonField(c.body(), s.spec.tsPath...), "", s.spec.tsUnit, c.now, s.tol); err != nil {
			return err
		}
	}
	return nil
}

// content appends to dst the signed content of c's request: the spec's
// parts with ts as the signed time and hdrVals[i] as part i's header value.
func (s *macScheme) content(c *call, dst [][]byte, ts string, hdrVals *[maxParts]string) ([][]byte, error) {
	for i, p := range s.spec.parts {
		switch p.kind {
		case partLit:
			dst = append(dst, p.lit)
		case partBody:
			dst = append(dst, c.body())
		case partTimestamp:
			dst = append(dst, []byte(ts))
		case partHeader:
			dst = append(dst, []byte(hdrVals[i]))
		case partMethod:
			dst = append(dst, []byte(c.r.method()))
		case partURL:
			u := c.publicURL()
			if p.url != nil {
				u = p.url(u)
			}
			dst = append(dst, []byte(u))
		case partForm:
			var pairs []byte
			if c.r.isForm() {
				f, err := c.parsedForm()
				if err != nil {
					return nil, fail(ReasonMalformedBody, "")
				}
				pairs = f.sortedPairs(nil)
			}
			dst = append(dst, pairs)
		}
	}
	return dst, nil
}

// parseList parses a key=value signature header per spec: entries
// separated by spec.sep, exactly one timestamp entry when spec.tsKey is
// set and at least one signature entry; other keys are ignored. It returns
// the timestamp as sent, or a Reason on failure.
func parseList(v string, spec *listSpec, enc encoding, size int, c *candidates) (ts, reason string) {
	entries := 0
	for item := range strings.SplitSeq(v, spec.sep) {
		if entries++; entries > maxEntries {
			return "", ReasonTooManySignatures
		}
		key, val, ok := strings.Cut(trimOWS(item), "=")
		if !ok || key == "" || val == "" {
			return "", ReasonMalformedSignature
		}
		switch key {
		case spec.tsKey:
			if ts != "" {
				return "", ReasonMalformedSignature
			}
			ts = val
		case spec.sigKey:
			if r := c.add(enc, size, val); r != "" {
				return "", r
			}
		}
	}
	switch {
	case spec.tsKey != "" && ts == "":
		return "", ReasonMalformedSignature
	case c.n == 0:
		return "", ReasonUnsupportedVersion
	}
	return ts, ""
}

// maxMillisDigits bounds a unix-milliseconds timestamp.
const maxMillisDigits = 15

// checkTime parses the signed time ts (from header, "" for a body field)
// in unit and checks that it lies within tol of now, in either direction.
func checkTime(ts, header string, unit tsUnit, now time.Time, tol time.Duration) error {
	var at time.Time
	switch unit {
	case unitSeconds:
		return checkTimestamp(ts, header, now, tol)
	case unitMillis:
		if len(ts) > maxMillisDigits {
			return fail(ReasonMalformedTimestamp, header)
		}
		ms, ok := parseDigits(ts)
		if !ok {
			return fail(ReasonMalformedTimestamp, header)
		}
		at = time.UnixMilli(ms)
	case unitRFC3339:
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || len(ts) > 64 {
			return fail(ReasonMalformedTimestamp, header)
		}
		at = t
	}
	if d := now.Sub(at); d > tol || d < -tol {
		return fail(ReasonStaleTimestamp, header)
	}
	return nil
}

// parseDigits parses 1 to 18 ASCII digits.
func parseDigits(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
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

// maxEntries bounds the comma- or space-separated entries parsed in one
// signature header, whatever their version.
const maxEntries = 2 * MaxSignatures

// headerName validates the header name in field and returns its canonical
// form; "" stays "".
func headerName(field, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return "", fmt.Errorf("%s: %q is not a valid header name", field, name)
		}
	}
	return textproto.CanonicalMIMEHeaderKey(name), nil
}

// isTokenChar reports whether c may appear in an HTTP field name (RFC 9110 token).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// errTolNeedsTimestamp refuses a tolerance where no time is signed.
var errTolNeedsTimestamp = errors.New("tolerance: needs timestamp_header")
