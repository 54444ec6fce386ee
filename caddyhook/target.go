package caddyhook

import (
	"net/http"
	"net/url"
	"strings"
)

// The request target as the client sent it, read by the first step of a
// request (a raw target the gateway refuses, a token in the URL) and, for
// a forwarded request, by the router and the forwarder (the path as the
// gateway reads it).

// requestTarget is the request target as the client sent it (what Caddy's
// access log shows as uri).
func requestTarget(r *http.Request) string {
	if r.RequestURI != "" {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// subPath returns the part of path below base (slashes trimmed) and
// whether path is under base at all.
func subPath(path, base string) (string, bool) {
	rest, ok := strings.CutPrefix(path, base)
	if !ok || rest != "" && rest[0] != '/' {
		return "", false
	}
	return strings.Trim(rest, "/"), true
}

// splitTarget splits a request target into its path and the rest after the
// first "?", ";" or "#" (parameters, in whichever of those forms).
func splitTarget(target string) (path, params string) {
	if i := strings.IndexAny(target, "?;#"); i >= 0 {
		return target[:i], target[i+1:]
	}
	return target, ""
}

// nextParam splits the first parameter off a query. Parameters are
// separated by "&", by ";" (which some servers and frameworks accept) and
// by "#" (a fragment sent on the wire arrives as part of the query).
func nextParam(raw string) (param, rest string) {
	if i := strings.IndexAny(raw, "&;#"); i >= 0 {
		return raw[:i], raw[i+1:]
	}
	return raw, ""
}

// reasonRawTarget is the 400 of a request target with raw bytes the
// gateway's HTTP parser refuses.
const reasonRawTarget = "invalid request target: percent-encode non-ASCII and control characters"

// rawTargetOK reports whether a request target has only the bytes the
// gateway's HTTP parser accepts in one (no control character, no byte
// outside ASCII: a raw UTF-8 path or query is refused with 400 there).
func rawTargetOK(target string) bool {
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// gatewayRest returns the part of a request target's path below base as
// the gateway's URL parser (WHATWG) reads it: the path up to the query or
// fragment, of an absolute-form target too, with backslashes read as
// slashes and the characters the parser percent-encodes encoded; escapes
// are kept as sent. ok is false when the path as sent is not under base
// (a base sent percent-encoded, which the gateway does not serve) or has
// a dot segment (".", "..", "%2e" and their mixes, which the parser
// resolves into another path).
func gatewayRest(target, base string) (string, bool) {
	p := target
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if !strings.HasPrefix(p, "/") {
		i := strings.Index(p, "://")
		if i < 0 {
			return "", false
		}
		p = p[i+3:]
		if j := strings.IndexByte(p, '/'); j >= 0 {
			p = p[j:]
		} else {
			p = "/"
		}
	}
	p = gatewayEscape(p)
	rest, found := strings.CutPrefix(p, base)
	if !found || rest != "" && rest[0] != '/' {
		return "", false
	}
	for seg := range strings.SplitSeq(rest, "/") {
		switch strings.ToLower(seg) {
		case ".", "..", "%2e", ".%2e", "%2e.", "%2e%2e":
			return "", false
		}
	}
	return rest, true
}

// gatewayEscape is path p as the gateway's URL parser leaves it: the
// bytes of the WHATWG path percent-encode set encoded, backslashes read
// as slashes, everything else (escapes included) as it is.
func gatewayEscape(p string) string {
	if strings.IndexFunc(p, needsGatewayEscape) < 0 {
		return p
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			b.WriteByte('/')
		case needsGatewayEscape(rune(c)):
			b.Write([]byte{'%', hex[c>>4], hex[c&15]})
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// needsGatewayEscape reports the bytes the gateway's URL parser
// percent-encodes in a path (the WHATWG path percent-encode set), and the
// backslash, which it reads as a slash.
func needsGatewayEscape(r rune) bool {
	switch {
	case r <= ' ' || r >= 0x7f:
		return true
	}
	return strings.ContainsRune("\"#<>?`{}\\", r)
}

// gatewaySub is the hook name below base as the gateway's URL parser
// reads a request target whose path Go's reads otherwise: a raw '#'
// (the gateway reads a fragment; Go keeps it in the path) or a backslash
// (a slash to the gateway). The name is decoded, as Go's path is, with
// the slashes around it trimmed. ok is false when the target has neither
// or the gateway does not read it under base (the caller keeps Go's
// reading).
func gatewaySub(target, base string) (string, bool) {
	p, _, _ := strings.Cut(target, "?")
	if !strings.ContainsAny(p, "#\\") {
		return "", false
	}
	rest, ok := gatewayRest(target, base)
	if !ok {
		return "", false
	}
	sub, err := url.PathUnescape(rest)
	if err != nil {
		return "", false
	}
	return strings.Trim(sub, "/"), true
}
