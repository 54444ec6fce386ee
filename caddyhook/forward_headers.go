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

// The name rule. A header crosses when its name says it carries neither
// a credential nor what a proxy in front asserts (a client address, an
// authenticated identity, a rewritten request): classifyName reads the
// name as words (split at '-', '_' and '.', lower-cased) and lets it
// cross unless a word, read in its context, marks it. The words are read
// whole, so that an ordinary vendor header that merely contains a
// credential's letters crosses (X-Author, X-Payment-Method,
// X-GitHub-Enterprise-Host, X-Remote-Branch, X-Ip-Country); a word that
// names a credential stops the header unless the words around it say the
// value is about the credential, not the credential
// (I-Twilio-Idempotency-Token, X-Correlation-Key, X-Signature-Timestamp);
// names written without separators are caught by the compounds
// (x-arr-clientcert, x-azure-clientip, x-authtoken).
var (
	// nameWords: whole words and what they mark.
	nameWords = func() map[string]wordKind {
		m := map[string]wordKind{}
		for kind, words := range map[wordKind][]string{
			wordCredential: {"token", "tokens", "secret", "secrets", "password", "passwd", "pwd", "pass", "passphrase",
				"passcode", "cookie", "cookies", "credential", "credentials", "signature", "sig", "apikey", "accesskey",
				"secretkey", "privatekey", "jwt", "bearer", "csrf", "xsrf", "hmac", "auth", "authorization", "authenticate",
				"authentication", "authenticated", "authn", "authz", "oauth", "oauth2", "session", "sid", "otp", "totp",
				"hotp", "mfa", "2fa", "dpop", "saml", "assertion", "kerberos", "negotiate"},
			wordIdentity: {"username", "userid", "userinfo", "useremail", "userlogin", "principal", "identity", "oidc",
				"consumer", "vouch", "webauth", "impersonate", "impersonation", "cert", "certs", "certificate",
				"clientcert", "groups", "roles", "claim", "claims", "scopes", "mtls", "ssl", "tls"},
			wordForwarding: {"forwarded", "via", "override", "rewrite", "https", "scheme"},
			wordUser:       {"user", "users"},
			wordAddress:    {"addr", "address", "port"},
			wordIP:         {"ip", "ips", "ipv4", "ipv6", "ipaddr", "ipaddress"},
			wordOwner:      {"client", "external", "real", "originating", "connecting", "peer", "source", "true", "socket", "remote"},
			wordHost:       {"host"},
			wordMethod:     {"method"},
			wordOriginal:   {"original", "orig"},
		} {
			for _, w := range words {
				m[w] = kind
			}
		}
		return m
	}()
	// compounds: parts of a word that mark it (names written without
	// separators); a word that is one of nameWords is read by its context
	// instead.
	compounds = []nameFragment{
		{"token", headerCredential}, {"secret", headerCredential}, {"passw", headerCredential},
		{"passphrase", headerCredential}, {"cookie", headerCredential}, {"credential", headerCredential},
		{"signature", headerCredential}, {"apikey", headerCredential}, {"accesskey", headerCredential},
		{"privatekey", headerCredential}, {"jwt", headerCredential}, {"bearer", headerCredential},
		{"csrf", headerCredential}, {"xsrf", headerCredential}, {"hmac", headerCredential},
		{"authoriz", headerCredential}, {"authentic", headerCredential}, {"oauth", headerCredential},
		{"sessionid", headerCredential}, {"sessid", headerCredential},
		{"forwarded", headerForwarding}, {"override", headerForwarding}, {"clientip", headerForwarding},
		{"socketip", headerForwarding}, {"realip", headerForwarding}, {"remoteip", headerForwarding},
		{"peerip", headerForwarding}, {"sourceip", headerForwarding}, {"userip", headerForwarding},
		{"connectingip", headerForwarding}, {"originatingip", headerForwarding}, {"remoteaddr", headerForwarding},
		{"clientaddr", headerForwarding}, {"originalurl", headerForwarding}, {"originaluri", headerForwarding},
		{"rewriteurl", headerForwarding}, {"httpmethod", headerForwarding}, {"originalmethod", headerForwarding},
		{"clientcert", headerForwarding}, {"sslclient", headerForwarding}, {"remoteuser", headerForwarding},
		{"authuser", headerForwarding}, {"username", headerForwarding}, {"userid", headerForwarding},
		{"userinfo", headerForwarding}, {"useremail", headerForwarding}, {"principal", headerForwarding},
		{"oidc", headerForwarding},
	}
	// compoundIndex lists compounds by their first byte.
	compoundIndex = func() (idx [256][]nameFragment) {
		for _, c := range compounds {
			idx[c.text[0]] = append(idx[c.text[0]], c)
		}
		return idx
	}()
	// keyKinds: a name whose last word ends in "key" is a credential
	// ("x-api-key", "ocp-apim-subscription-key", "x-functions-key") unless
	// the word before a last word "key" says what kind of key it is
	// ("idempotency-key", Bitbucket's "x-event-key", "x-correlation-key").
	keyKinds = wordSet("idempotency", "event", "dedupe", "dedup", "deduplication", "routing", "partition", "cache",
		"correlation", "request", "message", "job", "resource", "record", "entity", "object", "group", "batch",
		"shard", "trace", "cursor", "sort", "lookup", "sequence", "topic", "order")
	// tokenKinds: likewise for a word "token": the word before says
	// it is no credential ("i-twilio-idempotency-token", a page token).
	tokenKinds = wordSet("idempotency", "continuation", "page", "pagination", "next", "cursor", "sync", "resume",
		"delta", "change", "changes", "dedupe", "dedup", "deduplication", "correlation")
	// aboutWords: a signature word followed by one of these names
	// something about the signature, not the signature
	// ("x-signature-timestamp", "signature-input").
	aboutWords = wordSet("timestamp", "time", "version", "alg", "algorithm", "algorithms", "kid", "keyid", "input", "type")
	// hostOwners and methodOwners: the words before "host" and "method"
	// that make them a proxy's assertion ("x-original-host",
	// "x-http-method"), as a bare "x-host" or "x-method" is; any other host or method
	// (X-GitHub-Enterprise-Host, X-Payment-Method) is the sender's data.
	hostOwners   = wordSet("forwarded", "original", "orig", "real", "proxy", "http", "frontend", "front", "backend", "upstream")
	methodOwners = wordSet("http", "original", "orig", "request", "real")
	// originalOf: what an "original" word before it makes a proxy's
	// assertion (X-Original-URL; X-Original-Sender is the sender's).
	originalOf = wordSet("url", "uri", "host", "method", "path", "for", "ip", "addr", "address", "proto", "scheme", "port", "request", "forwarded")
	// clientOf: what a "client" word before it makes a TLS client's
	// identity as a proxy asserts it (X-Client-Verify, X-Client-DN).
	clientOf = wordSet("verify", "dn", "subject", "issuer", "serial", "fingerprint", "cert", "certificate", "email")
	// forwardingPrefixes: names a proxy or an identity-aware proxy
	// writes, whatever follows.
	forwardingPrefixes = []string{"x-forwarded", "tailscale-", "cf-access-", "x-envoy-", "x-pomerium-",
		"x-amzn-oidc-", "x-ms-client-", "x-goog-authenticated-", "x-arr-", "x-vouch-", "x-auth-request-",
		"x-consumer-", "x-credential-", "x-authentik-", "remote-"}
)

// nameFragment is a part of a word and the class it marks.
type nameFragment struct {
	text  string
	class headerClass
}

// wordSet is a set of words.
func wordSet(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// wordKind is what a whole word of a header name marks, alone or with
// the words around it.
type wordKind uint8

const (
	wordCredential wordKind = iota + 1 // a credential: stops the header (keyKinds, tokenKinds, aboutWords aside)
	wordIdentity                       // an authenticated identity a proxy asserts
	wordForwarding                     // a proxy's assertion
	wordUser                           // a user's identity, but in User-Agent
	wordAddress                        // an address or port: a proxy's with an owner word
	wordIP                             // an IP address, when the name's last word
	wordOwner                          // whose address (client, real, remote, …)
	wordHost                           // a host: a proxy's after hostOwners
	wordMethod                         // a method: a proxy's after methodOwners or before override
	wordOriginal                       // original: a proxy's before originalOf
)

// maxNameWords bounds the words classifyName reads; a longer name does
// not cross.
const maxNameWords = 16

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
		"X-Goog-Resource-State", "X-Goog-Message-Number", "X-Github-Enterprise-Host", "X-Github-Enterprise-Version",
		"I-Twilio-Idempotency-Token", "X-Signature-Timestamp"} {
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

// classifyName is classifyHeader without the lookup: the name rule above.
// It does not allocate for names up to 64 bytes.
func classifyName(name string) headerClass {
	if !validHeaderName(name) {
		return headerInvalid
	}
	var buf [64]byte
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
	var words [maxNameWords][]byte
	n := 0
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
		if n == maxNameWords {
			return headerCredential
		}
		words[n] = w
		n++
	}
	return classifyWords(words[:n])
}

// classifyWords applies the name rule to a name's words.
func classifyWords(words [][]byte) headerClass {
	n := len(words)
	word := func(i int) string {
		if i < 0 || i >= n {
			return ""
		}
		return string(words[i])
	}
	credential, forwarding, owner, address := false, false, false, false
	// bare: the name is one word, or x- and one word (X-Host, X-Method)
	bare := n == 1 || n == 2 && word(0) == "x"
	for i, w := range words {
		kind := nameWords[string(w)]
		switch kind {
		case wordCredential:
			switch {
			case (string(w) == "token" || string(w) == "tokens") && tokenKinds[word(i-1)]:
			case (string(w) == "signature" || string(w) == "sig") && aboutWords[word(i+1)]:
			default:
				credential = true
			}
		case wordIdentity, wordForwarding:
			forwarding = true
		case wordUser:
			forwarding = forwarding || word(i+1) != "agent"
		case wordAddress:
			address = true
		case wordIP:
			forwarding = forwarding || i == n-1
		case wordOwner:
			owner = true
			forwarding = forwarding || string(w) == "client" && clientOf[word(i+1)]
		case wordHost:
			forwarding = forwarding || bare || hostOwners[word(i-1)]
		case wordMethod:
			forwarding = forwarding || bare || methodOwners[word(i-1)] || word(i+1) == "override"
		case wordOriginal:
			forwarding = forwarding || originalOf[word(i+1)]
		}
		if kind != 0 || len(w) < 3 {
			continue // a whole word is read by its context; no compound is shorter
		}
		for j := range w {
			for _, c := range compoundIndex[w[j]] {
				if len(w)-j >= len(c.text) && string(w[j:j+len(c.text)]) == c.text {
					credential = credential || c.class == headerCredential
					forwarding = forwarding || c.class == headerForwarding
				}
			}
		}
	}
	if last := words[max(n-1, 0):]; n > 0 && hasSuffixB(last[0], "key") && !(string(last[0]) == "key" && keyKinds[word(n-2)]) {
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
