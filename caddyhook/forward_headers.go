package caddyhook

import (
	"net/http"
	"slices"
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
	// nameFragments, by the class they mark: credentials, and forwarding
	// names written without separators ("x-azure-clientip").
	nameFragments = map[headerClass][]string{
		headerCredential: {"auth", "token", "secret", "passw", "passphrase", "cookie", "credential", "signature",
			"apikey", "accesskey", "privatekey", "jwt", "bearer", "csrf", "xsrf", "hmac"},
		headerForwarding: {"forwarded", "override", "clientip", "socketip", "realip", "remoteip", "peerip", "sourceip",
			"userip", "connectingip", "originatingip", "remoteaddr", "clientaddr", "originalurl", "originaluri",
			"rewriteurl", "httpmethod", "originalmethod"},
	}
	// nameWords: whole words and what they mark. An address word marks a
	// client address when an owner word says whose
	// ("x-envoy-external-address", "x-client-addr").
	nameWords = func() map[string]wordKind {
		m := map[string]wordKind{}
		for kind, words := range map[wordKind][]string{
			wordCredential: {"sig", "pwd", "pass", "session", "sid"},
			wordForwarding: {"forwarded", "via", "remote", "principal", "oidc", "ip", "ips", "ipv4", "ipv6", "ipaddr",
				"ipaddress", "override", "method", "original", "rewrite", "host", "scheme", "https", "ssl", "tls"},
			wordAddress: {"addr", "address"},
			wordOwner:   {"client", "external", "real", "originating", "connecting", "peer", "source", "true", "user", "socket"},
		} {
			for _, w := range words {
				m[w] = kind
			}
		}
		return m
	}()
	// keyKinds: a name whose last word ends in "key" is a credential
	// ("x-api-key", "ocp-apim-subscription-key", "x-functions-key") unless
	// the word before a last word "key" says what kind of key it is
	// ("idempotency-key", Bitbucket's "x-event-key").
	keyKinds = map[string]bool{"idempotency": true, "event": true, "dedupe": true, "dedup": true,
		"deduplication": true, "routing": true, "partition": true, "cache": true}
	forwardingPrefixes = []string{"x-forwarded", "tailscale-", "cf-access-", "x-envoy-", "x-pomerium-",
		"x-amzn-oidc-", "x-ms-client-", "x-goog-authenticated-"}
	// fragmentIndex lists nameFragments by their first byte.
	fragmentIndex = func() (idx [256][]nameFragment) {
		for class, fs := range nameFragments {
			for _, f := range fs {
				idx[f[0]] = append(idx[f[0]], nameFragment{f, class})
			}
		}
		return idx
	}()
)

// wordKind is what a whole word of a header name marks.
type wordKind uint8

const (
	wordCredential wordKind = iota + 1
	wordForwarding
	wordAddress
	wordOwner
)

// nameFragment is a fragment and the class it marks.
type nameFragment struct {
	text  string
	class headerClass
}

// commonHeaderClasses holds the class of the headers most requests carry,
// by canonical name, so that they are classified with one lookup;
// classifyName computes it (and every other name's).
var commonHeaderClasses = func() map[string]headerClass {
	m := map[string]headerClass{}
	for _, n := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Encoding", "Content-Length", "Content-Type", "Cookie", "Expect", "Forwarded", "Host",
		"Idempotency-Key", "Keep-Alive", "Origin", "Pragma", "Referer", "Te", "Traceparent", "Tracestate", "Transfer-Encoding",
		"User-Agent", "Via", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "X-Request-Id",
		"X-Github-Event", "X-Github-Delivery", "X-Github-Hook-Id", "X-Hub-Signature-256", "X-Openclaw-Token",
		"X-Openclaw-Idempotency-Key", "X-Service-Token", "Stripe-Signature", "Webhook-Id", "Webhook-Timestamp",
		"Webhook-Signature", "X-Slack-Signature", "X-Slack-Request-Timestamp", "X-Gitlab-Event", "X-Gitlab-Token",
		"Baggage", "Sentry-Trace", "X-Amzn-Trace-Id", "X-Hub-Signature", "X-Github-Hook-Installation-Target-Id",
		"X-Github-Hook-Installation-Target-Type", "X-Gitlab-Event-Uuid", "X-Gitlab-Instance", "X-Gitlab-Webhook-Uuid",
		"X-Slack-Retry-Num", "X-Slack-Retry-Reason", "Svix-Id", "Svix-Timestamp", "Svix-Signature", "X-Goog-Channel-Id",
		"X-Goog-Resource-State", "X-Goog-Message-Number"} {
		m[n] = classifyName(n)
	}
	return m
}()

// classifyHeader classifies a header by its name alone (any case): one
// lookup for a common header as the server canonicalises it, else
// classifyName.
func classifyHeader(name string) headerClass {
	if c, ok := commonHeaderClasses[name]; ok {
		return c
	}
	return classifyName(name)
}

// classifyName is classifyHeader without the lookup. It does not
// allocate for names up to 64 bytes.
func classifyName(name string) headerClass {
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
		switch nameWords[string(w)] {
		case wordForwarding:
			forwarding = true
		case wordAddress:
			address = true
		case wordOwner:
			owner = true
		case wordCredential:
			credential = true
		}
		prev, last = last, w
	}
	for i := range joined {
		for _, f := range fragmentIndex[joined[i]] {
			if len(joined)-i >= len(f.text) && string(joined[i:i+len(f.text)]) == f.text {
				credential = credential || f.class == headerCredential
				forwarding = forwarding || f.class == headerForwarding
			}
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
// credential headers (skip: its token header aliases, its verifiers'
// signature headers) nor listed in the request's Connection header, and whose values
// are all valid; plus the request's Host, under "Host" (the gateway client
// sends it as the request's host). Trace context goes through
// requestTrace. target is the forwarded path and query, counted with the
// headers against the bounds (431 past them).
//
// The result is a new map whose value slices are the request's (capacity
// clipped, so appending to one copies it).
func crossingHeaders(r *http.Request, target string, skip map[string]bool) (http.Header, *hookError) {
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
		if classifyHeader(k) != headerCrosses || skip[ck] || listed[ck] || !allValid(v) {
			continue
		}
		for _, s := range v {
			size += len(k) + len(s) + len(": \r\n")
		}
		fields += len(v)
		out[k] = slices.Clip(v)
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
