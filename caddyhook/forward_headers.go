package caddyhook

import (
	"net/http"
	"strings"
)

// What of a sender's request headers reaches the gateway in forward mode:
// crossingHeaders decides it, for every header, with one positive rule
// (see classifyHeader). The gateway's mappings read arbitrary headers
// ({{headers.x-github-event}}, a transform's ctx.headers), so the rule
// lets through every header that is none of the classes below, rather
// than a list of known provider headers.

// headerClass says whether a sender's header crosses to the gateway and,
// when it does not, why.
type headerClass uint8

const (
	// headerCrosses: the header reaches the gateway as sent.
	headerCrosses headerClass = iota
	// headerTransport: hop-by-hop, or written by the edge's own client
	// (Host is carried apart, as the request's host).
	headerTransport
	// headerCredential: a credential, whatever its name.
	headerCredential
	// headerForwarding: a forwarding, client-address, proxy-identity or
	// request-override header: what a proxy in front asserts, never a
	// sender.
	headerForwarding
	// headerTrace: W3C trace context, passed on by requestTrace only when
	// well formed and bounded.
	headerTrace
	// headerInvalid: not an RFC 9110 field name.
	headerInvalid
)

// Bounds of a forwarded request: what the gateway's HTTP parser (Node's,
// 16 KiB for the request line and headers, 2,000 fields) accepts, less
// room for what the edge adds (its credential, an Idempotency-Key, trace
// context). A request over them is refused with 431 before it is
// accepted, rather than spooled for a gateway that refuses it.
const (
	maxForwardHeaderBytes = 15 << 10
	maxForwardFields      = 1000
)

// reasonHeadersTooLarge is the 431 of a request over the bounds.
const reasonHeadersTooLarge = "request headers too large to forward to the gateway (request line and headers over 15 KiB or 1,000 fields)"

// transportHeaders are written by the edge's HTTP client or concern one
// connection only; Host crosses as the request's host.
var transportHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Host": true, "Content-Length": true, "Expect": true,
	"Http2-Settings": true,
}

// Name patterns, matched on the lower-cased name: the fragments anywhere
// in it (separators removed), the words as whole words (split at '-', '_'
// and '.'), forwardingPrefixes at its start.
var (
	credentialFragments = []string{"auth", "token", "secret", "passw", "passphrase", "cookie", "credential",
		"signature", "apikey", "accesskey", "privatekey", "jwt", "bearer", "csrf", "xsrf", "hmac"}
	credentialWords = map[string]bool{"sig": true, "pwd": true, "pass": true, "session": true, "sid": true}
	// keyWords: a name ending in one of these words, or in a word ending
	// in "key", is a credential ("x-api-key", "ocp-apim-subscription-key",
	// "x-functions-key") unless the word before it says what kind of key
	// it is (keyKinds: "idempotency-key", Bitbucket's "x-event-key").
	keyKinds = map[string]bool{"idempotency": true, "event": true, "dedupe": true, "dedup": true,
		"deduplication": true, "routing": true, "partition": true, "cache": true}

	forwardingWords = map[string]bool{
		"forwarded": true, "via": true, "remote": true, "principal": true, "oidc": true,
		"ip": true, "ips": true, "ipv4": true, "ipv6": true, "ipaddr": true, "ipaddress": true,
		"override": true, "method": true, "original": true, "rewrite": true, "host": true,
		"scheme": true, "https": true, "ssl": true, "tls": true,
	}
	// addressWords name a client address when another word of the name
	// says whose ("x-envoy-external-address", "x-remote-addr").
	addressWords  = map[string]bool{"addr": true, "address": true}
	addressOwners = map[string]bool{"client": true, "external": true, "real": true, "originating": true,
		"connecting": true, "peer": true, "source": true, "true": true, "user": true, "socket": true}
	// forwardingFragments, anywhere in the name without separators:
	// "x-azure-clientip", "x-http-methodoverride".
	forwardingFragments = []string{"forwarded", "override", "clientip", "socketip", "realip", "remoteip", "peerip",
		"sourceip", "userip", "connectingip", "originatingip", "remoteaddr", "clientaddr", "originalurl", "originaluri",
		"rewriteurl", "httpmethod", "originalmethod"}
	forwardingPrefixes = []string{"x-forwarded", "tailscale-", "cf-access-", "x-envoy-", "x-pomerium-",
		"x-amzn-oidc-", "x-ms-client-", "x-goog-authenticated-"}
)

// classifyHeader classifies a header by its name alone (any case). It
// does not allocate for names up to 64 bytes.
func classifyHeader(name string) headerClass {
	if !validHeaderName(name) {
		return headerInvalid
	}
	var buf, jbuf [64]byte
	lower := asciiLower(buf[:0], name)
	switch string(lower) {
	case "traceparent", "tracestate":
		return headerTrace
	}
	if transportHeaders[http.CanonicalHeaderKey(name)] {
		return headerTransport
	}
	for _, p := range forwardingPrefixes {
		if len(lower) >= len(p) && string(lower[:len(p)]) == p {
			return headerForwarding
		}
	}
	joined := jbuf[:0] // the name without separators
	forwarding, address, owner, credential := false, false, false, false
	var prev, last []byte
	for rest := lower; len(rest) > 0; {
		i := 0
		for i < len(rest) && !isNameSeparator(rest[i]) {
			i++
		}
		w := rest[:i]
		if i < len(rest) {
			i++
		}
		rest = rest[i:]
		if len(w) == 0 {
			continue
		}
		joined = append(joined, w...)
		switch {
		case forwardingWords[string(w)]:
			forwarding = true
		case addressWords[string(w)]:
			address = true
		case addressOwners[string(w)]:
			owner = true
		case credentialWords[string(w)]:
			credential = true
		}
		prev, last = last, w
	}
	for _, f := range credentialFragments {
		if containsB(joined, f) {
			credential = true
		}
	}
	for _, f := range forwardingFragments {
		if containsB(joined, f) {
			forwarding = true
		}
	}
	if hasSuffixB(last, "key") && !(string(last) == "key" && keyKinds[string(prev)]) {
		credential = true
	}
	switch {
	case credential:
		return headerCredential
	case forwarding, address && owner:
		return headerForwarding
	}
	return headerCrosses
}

// isNameSeparator splits a header name into words.
func isNameSeparator(c byte) bool { return c == '-' || c == '_' || c == '.' }

// hasSuffixB is strings.HasSuffix for a byte slice.
func hasSuffixB(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[len(b)-len(s):]) == s
}

// containsB is strings.Contains for a byte slice.
func containsB(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return true
		}
	}
	return false
}

// asciiLower appends s lower-cased (ASCII) to dst.
func asciiLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// validHeaderValue reports an RFC 9110 field value: no control character
// but horizontal tab (what the edge's HTTP client also refuses to send).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// crossingHeaders is the one function that decides what of a sender's
// request headers reaches the gateway in forward mode: every header whose
// name classifyHeader lets cross, that is not one of the handler's own
// credential headers (its token header aliases, its verifiers' signature
// headers) nor listed in the request's Connection header, and whose values
// are all valid; plus the request's Host, under "Host" (the gateway client
// sends it as the request's host). Trace context goes through
// requestTrace. target is the forwarded path and query, counted with the
// headers against the bounds (431 past them).
//
// The result is a new map whose value slices are the request's (capacity
// clipped, so appending to one copies it).
func (h *Handler) crossingHeaders(r *http.Request, target string) (http.Header, *hookError) {
	src := r.Header
	var listed map[string]bool // names the Connection header marks hop-by-hop
	for _, v := range src["Connection"] {
		for n := range strings.SplitSeq(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				if listed == nil {
					listed = map[string]bool{}
				}
				listed[http.CanonicalHeaderKey(n)] = true
			}
		}
	}
	out := make(http.Header, len(src)+4)
	size, fields := len(target), 0
	if r.Host != "" && validHeaderValue(r.Host) {
		out["Host"] = []string{r.Host}
		size += len("Host: \r\n") + len(r.Host)
		fields++
	}
	for k, v := range src {
		ck := http.CanonicalHeaderKey(k) // no copy when k is canonical, as the server makes it
		if classifyHeader(k) != headerCrosses || h.forwardSkip[ck] || listed[ck] || !allValid(v) {
			continue
		}
		for _, s := range v {
			size += len(k) + len(s) + len(": \r\n")
		}
		fields += len(v)
		out[k] = v[:len(v):len(v)]
	}
	if size > maxForwardHeaderBytes || fields > maxForwardFields {
		return nil, reject(http.StatusRequestHeaderFieldsTooLarge, reasonHeadersTooLarge)
	}
	return out, nil
}

// allValid reports whether every value is a valid field value.
func allValid(vs []string) bool {
	for _, v := range vs {
		if !validHeaderValue(v) {
			return false
		}
	}
	return true
}

// provisionForwardHeaders collects the handler's own credential headers,
// which never cross whatever their names: its token header aliases
// (x-service-token and token_headers) and its verifiers' signature
// headers.
func (h *Handler) provisionForwardHeaders() {
	h.forwardSkip = map[string]bool{}
	for _, n := range h.signatureHeaders() {
		h.forwardSkip[http.CanonicalHeaderKey(n)] = true
	}
	for _, n := range h.tokenHeaders {
		h.forwardSkip[n] = true
	}
}
