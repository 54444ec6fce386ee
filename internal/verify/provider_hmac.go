package verify

import (
	"errors"
	"fmt"
)

// genericScheme is the configurable hmac provider: a macScheme built from
// the block's header, prefix, algorithm, encoding, layout and headers.
type genericScheme struct {
	*macScheme
	idHeader string // "" when there is no delivery id
}

func init() {
	register(&Provider{
		Name:      "hmac",
		Title:     "Any HMAC sender",
		Family:    FamilyHMAC,
		Signature: "<header>: <prefix><hex|base64 HMAC-SHA1|256|512(layout)>, layout from {body}, {timestamp}, {id}",
		Doc:       "https://www.rfc-editor.org/rfc/rfc2104",
		Notes:     "Configurable: header (required), prefix, algorithm, encoding, timestamp_header (must then be signed: {timestamp} in the layout), layout (default {body}), id_header. The secret is used as raw bytes.",
		DeliveryID: oneOf(fromFunc("header id_header", func(c *call) string {
			g, _ := unwrap(c.v.scheme).(*genericScheme)
			if g == nil || g.idHeader == "" {
				return ""
			}
			v, _ := headerValue(c.header(), g.idHeader)
			return v
		})),
		Event:     oneOf(fromJSON("event"), fromJSON("type")),
		Template:  "{{event}}",
		Tolerance: DefaultTolerance,
		Words:     []string{"secret", "header", "prefix", "algorithm", "encoding", "timestamp_header", "layout", "id_header"},
		Required:  []string{"secret"},
		SignsBody: true,
		build:     newGeneric,
	})
}

// unwrap returns the scheme inside a handshake wrapper.
func unwrap(s scheme) scheme {
	if w, ok := s.(*hsScheme); ok {
		return w.scheme
	}
	return s
}

// newGeneric validates the block for the hmac provider.
func newGeneric(b *builder) (scheme, error) {
	cfg := b.cfg
	var (
		spec         macSpec
		header, tsHd string
		idHeader     string
		err          error
	)
	if cfg.Header == "" {
		return nil, errors.New("header: required for scheme hmac")
	}
	if header, err = headerName("header", cfg.Header); err != nil {
		return nil, err
	}
	if tsHd, err = headerName("timestamp_header", cfg.TimestampHeader); err != nil {
		return nil, err
	}
	if idHeader, err = headerName("id_header", cfg.IDHeader); err != nil {
		return nil, err
	}
	if tsHd == header || idHeader == header || (idHeader != "" && idHeader == tsHd) {
		return nil, errors.New("header, timestamp_header and id_header must differ")
	}
	for i := 0; i < len(cfg.Prefix); i++ {
		if c := cfg.Prefix[i]; c <= ' ' || c > '~' {
			return nil, errors.New("prefix: only printable ASCII without spaces")
		}
	}
	if spec.alg, err = parseAlgorithm(cfg.Algorithm); err != nil {
		return nil, err
	}
	if spec.enc, err = parseEncoding(cfg.Encoding); err != nil {
		return nil, err
	}
	src := cfg.Layout
	if src == "" {
		src = "{body}"
	}
	l, err := parseLayout(src)
	if err != nil {
		return nil, err
	}
	switch {
	case l.hasTimestamp && tsHd == "":
		return nil, errors.New("layout: {timestamp} needs timestamp_header")
	case !l.hasTimestamp && tsHd != "":
		return nil, errors.New("timestamp_header: layout must sign {timestamp}, else the timestamp could be forged")
	case l.hasID && idHeader == "":
		return nil, errors.New("layout: {id} needs id_header")
	case tsHd == "" && cfg.Tolerance != 0:
		return nil, errors.New("tolerance: needs timestamp_header")
	}
	spec.headers, spec.prefix = []string{header}, cfg.Prefix
	if tsHd != "" {
		spec.tsFrom, spec.tsHeader = tsHeader, tsHd
	}
	for _, sg := range l.segs {
		switch sg.kind {
		case segLiteral:
			spec.parts = append(spec.parts, part{kind: partLit, lit: sg.literal})
		case segBody:
			spec.parts = append(spec.parts, bodyPart())
		case segTimestamp:
			spec.parts = append(spec.parts, tsPart())
		case segID:
			spec.parts = append(spec.parts, part{kind: partHeader, header: idHeader, missing: ReasonMissingID})
		}
	}
	m, err := b.macScheme(spec)
	if err != nil {
		return nil, err
	}
	return &genericScheme{macScheme: m, idHeader: idHeader}, nil
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
