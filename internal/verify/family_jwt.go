package verify

import "time"

// jwtSpec declares a JWT provider.
type jwtSpec struct {
	// header carries the token; "Bearer " is stripped when present.
	header string
	// needExp requires an exp claim.
	needExp bool
	// check verifies the provider's own claims (issuer, audience, body
	// digest); it fails with an *Error.
	check func(c *call, cl jwtClaims) error
}

// jwtScheme verifies a JWT carried in a header.
type jwtScheme struct {
	spec   jwtSpec
	keys   jwtKeys
	leeway time.Duration
}

// jwtProvider builds a JWT provider whose tokens are HS256 under the
// secrets (when keys is nil) or RS256/ES256 under keys.
func jwtProvider(spec jwtSpec, keys func(b *builder) (keySource, error)) func(b *builder) (scheme, error) {
	return func(b *builder) (scheme, error) {
		s := &jwtScheme{spec: spec}
		s.spec.header = mustHeader(spec.header)
		var err error
		if keys == nil {
			if s.keys.hmacKeys, err = decodeSecrets(b.cfg.Secrets, keyRaw); err != nil {
				return nil, err
			}
		} else if s.keys.keys, err = keys(b); err != nil {
			return nil, err
		}
		if s.leeway, err = b.tolerance(); err != nil {
			return nil, err
		}
		return s, nil
	}
}

// offered implements offerer.
func (s *jwtScheme) offered() []string { return []string{s.spec.header} }

// verify implements scheme.
func (s *jwtScheme) verify(c *call) error {
	v, err := requireHeader(c.header(), s.spec.header, ReasonMissingSignature)
	if err != nil {
		return err
	}
	if sch, tok, ok := cutFold(v, "Bearer "); ok && sch {
		v = tok
	}
	t, perr := parseJWT(v)
	if perr != nil {
		return fail(ReasonMalformedSignature, s.spec.header)
	}
	if err := s.keys.verifySig(c.r.ctx(), t, c.now, s.spec.header); err != nil {
		return err
	}
	cl, ok := readClaims(t)
	if !ok {
		return fail(ReasonBadClaims, s.spec.header)
	}
	if err := cl.checkTimes(c.now, s.leeway, s.spec.needExp, s.spec.header); err != nil {
		return err
	}
	if s.spec.check != nil {
		return s.spec.check(c, cl)
	}
	return nil
}

// cutFold cuts prefix from v, case-insensitively, trimming what follows.
func cutFold(v, prefix string) (bool, string, bool) {
	if len(v) < len(prefix) || !equalFoldASCII(v[:len(prefix)], prefix) {
		return false, v, false
	}
	return true, trimOWS(v[len(prefix):]), true
}

// equalFoldASCII compares ASCII strings case-insensitively.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
