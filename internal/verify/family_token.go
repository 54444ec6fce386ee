package verify

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// tokenSpec declares a token provider: where the shared secret is sent.
type tokenSpec struct {
	// header carries the token; for Authorization, "Bearer <token>" and
	// "Basic <base64 user:password>" (compared as "user:password") are
	// both read. Overridden by the block's header word where the provider
	// accepts it. A "Bearer " prefix is stripped from any header.
	header string
	// field, instead of a header, is the payload member carrying the token
	// (Mattermost's token).
	field []string
}

// tokenScheme compares a sent token with the configured secrets in
// constant time (their SHA-256, so neither length nor content leaks).
type tokenScheme struct {
	header string
	field  []string
	sums   [][sha256.Size]byte
}

// tokenProvider is the build function of a token provider declared by spec.
func tokenProvider(spec tokenSpec) func(b *builder) (scheme, error) {
	return func(b *builder) (scheme, error) { return b.tokenScheme(spec) }
}

// tokenScheme builds spec from b's config.
func (b *builder) tokenScheme(spec tokenSpec) (*tokenScheme, error) {
	keys, err := decodeSecrets(b.cfg.Secrets, keyRaw)
	if err != nil {
		return nil, err
	}
	s := &tokenScheme{field: spec.field}
	if spec.header != "" {
		s.header = mustHeader(spec.header)
	}
	if b.cfg.Header != "" {
		if s.header, err = headerName("header", b.cfg.Header); err != nil {
			return nil, err
		}
	}
	for _, k := range keys {
		s.sums = append(s.sums, sha256.Sum256(k))
	}
	return s, nil
}

// offered implements offerer.
func (s *tokenScheme) offered() []string {
	if s.header == "" {
		return nil
	}
	return []string{s.header}
}

// verify implements scheme.
func (s *tokenScheme) verify(c *call) error {
	var tok string
	if s.header != "" {
		v, err := requireHeader(c.header(), s.header, ReasonMissingSignature)
		if err != nil {
			return err
		}
		if tok = credential(s.header, v); tok == "" {
			return fail(ReasonMalformedSignature, s.header)
		}
	} else {
		// read before the payload drops the token
		if c.r.isForm() {
			f, err := c.parsedForm()
			if err != nil {
				return fail(ReasonMalformedBody, "")
			}
			tok = f.Get(s.field[0])
		} else {
			tok = jsonField(c.body(), s.field...)
		}
		if tok == "" {
			return fail(ReasonMissingSignature, "")
		}
	}
	if !s.matches(tok) {
		return fail(ReasonBadToken, s.header)
	}
	return nil
}

// matches reports whether tok is one of the secrets, comparing every one.
func (s *tokenScheme) matches(tok string) bool {
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	found := 0
	for i := range s.sums {
		found |= subtle.ConstantTimeCompare(sum[:], s.sums[i][:])
	}
	return found == 1
}

// credential extracts the token from a header value: Basic credentials
// decoded to "user:password" (Authorization only), a "Bearer " prefix
// stripped, else the value itself; "" when malformed.
func credential(header, v string) string {
	scheme, rest, ok := strings.Cut(v, " ")
	if ok {
		switch {
		case strings.EqualFold(scheme, "Bearer"):
			return trimOWS(rest)
		case strings.EqualFold(scheme, "Basic") && header == "Authorization":
			b, err := base64.StdEncoding.DecodeString(trimOWS(rest))
			if err != nil || !strings.Contains(string(b), ":") {
				return ""
			}
			return string(b)
		}
	}
	return v
}
