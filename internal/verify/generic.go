package verify

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// genericScheme is the configurable hmac scheme: one signature in Header,
// after Prefix, encoded per Encoding, the HMAC under Algorithm of the
// content described by Layout.
type genericScheme struct {
	header, prefix string
	enc            encoding
	tsHeader       string // "" when unsigned by time
	idHeader       string // "" when there is no delivery id
	tol            time.Duration
	layout         layout
}

// newGeneric validates cfg for the hmac scheme and returns it with its
// algorithm.
func newGeneric(cfg Config) (*genericScheme, algorithm, error) {
	g := &genericScheme{prefix: cfg.Prefix}
	var err error
	if cfg.Header == "" {
		return nil, algorithm{}, errors.New("header: required for scheme hmac")
	}
	if g.header, err = headerName("header", cfg.Header); err != nil {
		return nil, algorithm{}, err
	}
	if g.tsHeader, err = headerName("timestamp_header", cfg.TimestampHeader); err != nil {
		return nil, algorithm{}, err
	}
	if g.idHeader, err = headerName("id_header", cfg.IDHeader); err != nil {
		return nil, algorithm{}, err
	}
	if g.tsHeader == g.header || g.idHeader == g.header || (g.idHeader != "" && g.idHeader == g.tsHeader) {
		return nil, algorithm{}, errors.New("header, timestamp_header and id_header must differ")
	}
	for i := 0; i < len(cfg.Prefix); i++ {
		if c := cfg.Prefix[i]; c <= ' ' || c > '~' {
			return nil, algorithm{}, errors.New("prefix: only printable ASCII without spaces")
		}
	}
	alg, err := parseAlgorithm(cfg.Algorithm)
	if err != nil {
		return nil, algorithm{}, err
	}
	if g.enc, err = parseEncoding(cfg.Encoding); err != nil {
		return nil, algorithm{}, err
	}
	spec := cfg.Layout
	if spec == "" {
		spec = "{body}"
	}
	if g.layout, err = parseLayout(spec); err != nil {
		return nil, algorithm{}, err
	}
	switch {
	case g.layout.hasTimestamp && g.tsHeader == "":
		return nil, algorithm{}, errors.New("layout: {timestamp} needs timestamp_header")
	case !g.layout.hasTimestamp && g.tsHeader != "":
		return nil, algorithm{}, errors.New("timestamp_header: layout must sign {timestamp}, else the timestamp could be forged")
	case g.layout.hasID && g.idHeader == "":
		return nil, algorithm{}, errors.New("layout: {id} needs id_header")
	case g.tsHeader == "" && cfg.Tolerance != 0:
		return nil, algorithm{}, errors.New("tolerance: needs timestamp_header")
	}
	if g.tsHeader != "" {
		if g.tol, err = schemeTolerance(cfg); err != nil {
			return nil, algorithm{}, err
		}
	}
	return g, alg, nil
}

// parseAlgorithm maps Config.Algorithm to an algorithm ("" = sha256).
func parseAlgorithm(name string) (algorithm, error) {
	switch name {
	case "", "sha256":
		return algSHA256, nil
	case "sha1":
		return algSHA1, nil
	case "sha512":
		return algSHA512, nil
	}
	return algorithm{}, fmt.Errorf("algorithm: unknown %q (want sha1, sha256 or sha512)", name)
}

// parseEncoding maps Config.Encoding to an encoding ("" = hex).
func parseEncoding(name string) (encoding, error) {
	switch name {
	case "", "hex":
		return encHex, nil
	case "base64":
		return encBase64, nil
	}
	return 0, fmt.Errorf("encoding: unknown %q (want hex or base64)", name)
}

// verify implements scheme.
func (g *genericScheme) verify(m *macSet, h http.Header, body []byte, now time.Time) (Result, error) {
	sig, err := requireHeader(h, g.header, ReasonMissingSignature)
	if err != nil {
		return Result{}, err
	}
	var ts, id string
	if g.tsHeader != "" {
		if ts, err = requireHeader(h, g.tsHeader, ReasonMissingTimestamp); err != nil {
			return Result{}, err
		}
	}
	if g.layout.hasID {
		if id, err = requireHeader(h, g.idHeader, ReasonMissingID); err != nil {
			return Result{}, err
		}
	}
	var c candidates
	if r := parsePrefixed(sig, g.prefix, g.enc, m.size, &c); r != "" {
		return Result{}, fail(r, g.header)
	}
	if g.tsHeader != "" {
		if err := checkTimestamp(ts, g.tsHeader, now, g.tol); err != nil {
			return Result{}, err
		}
	}
	var buf [maxSegments][]byte
	if !m.match(&c, g.layout.parts(&buf, body, ts, id)...) {
		return Result{}, fail(ReasonBadSignature, g.header)
	}
	if !g.layout.hasID && g.idHeader != "" {
		id = deliveryID(h, g.idHeader)
	}
	return Result{DeliveryID: cleanID(id)}, nil
}
