package caddyhook

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
)

// forwardReq is a request the edge forwards to the gateway as the sender
// sent it, for a gateway that resolves it with its own hooks config: a
// /wake or /agent request in forward mode, or a hook of a forward mapping.
type forwardReq struct {
	name string // the gateway's hook name: wake, agent or the hook path
	kind Kind   // the spool lane: wake for /wake, agent for the rest
	body []byte // the sender's body
	// mode is a /wake request's mode (a spooled wake's reply names it).
	mode string
	// wait and timeoutSeconds are an /agent request's waitForCompletion
	// and timeoutSeconds: the gateway holds the answer until the run ends.
	wait           bool
	timeoutSeconds int64
}

// forwardBuiltin is the forward plan of a validated /wake or /agent
// request.
func forwardBuiltin(ex *exchange, a *Action) forwardReq {
	return forwardReq{name: ex.sub, kind: a.Kind, body: ex.body, mode: a.Mode, wait: a.Wait, timeoutSeconds: a.TimeoutSeconds}
}

// forwardMapped is the forward plan of a hook that mapping c forwards.
func forwardMapped(ex *exchange) forwardReq {
	return forwardReq{name: ex.sub, kind: KindAgent, body: ex.body}
}

// seed derives the request's event id from its idempotency key and
// everything the gateway receives, so that a replay, even after a
// restart, reaches the gateway with the same id.
func (f *forwardReq) seed(key, rawQuery string) string {
	buf := make([]byte, 0, len(key)+len(f.name)+len(rawQuery)+len(f.body)+4)
	buf = append(buf, key...)
	buf = append(buf, 0)
	buf = append(buf, f.name...)
	buf = append(buf, 0)
	buf = append(buf, rawQuery...)
	buf = append(buf, 0)
	buf = append(buf, f.body...)
	return uuid.NewSHA1(eventNamespace, buf).String()
}

// prepareForward builds the gateway request of f: the body as sent to
// {prefix}/<name>, with the sender's query minus token-like parameters
// and the headers the gateway's templates may read. The Idempotency-Key is
// the sender's own key when it gave one (so the gateway deduplicates as it
// would directly), else the event id.
func (h *Handler) prepareForward(ex *exchange, f *forwardReq, key, eventID string) prepared {
	if eventID == "" {
		eventID = uuid.NewString()
	}
	if key == "" {
		key = eventID
	}
	var path string
	switch q := forwardQuery(ex.r.URL.RawQuery); {
	case q == "" && (f.name == routeWake || f.name == routeAgent):
		path = h.gateway.paths[f.kind] // no allocation on the common path
	case q == "":
		path = h.gateway.prefix + "/" + f.name
	default:
		path = h.gateway.prefix + "/" + f.name + "?" + q
	}
	g := gatewayRequest{kind: f.kind, path: path, header: h.forwardHeader(ex.r.Header), body: f.body, idemKey: key}
	if f.wait {
		g.timeout = h.gateway.waitTimeoutFor(f.timeoutSeconds)
	}
	return prepared{gatewayRequest: g, mode: f.mode, eventID: eventID, forward: true}
}

// Headers never forwarded: hop-by-hop headers (and the ones Go's
// transport writes itself), credentials, and the forwarded-address
// headers the gateway answers with 403 from a peer it does not trust.
var forwardDropped = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true, "Expect": true,
	"Authorization": true, headerServiceToken: true, "X-Openclaw-Token": true, "Cookie": true,
	"Forwarded": true, "X-Real-Ip": true, "Idempotency-Key": true,
}

// forwardDroppedPrefixes are header name prefixes never forwarded: the
// X-Forwarded-* family and the identity headers of a Tailscale proxy.
var forwardDroppedPrefixes = []string{"X-Forwarded-", "Tailscale-"}

// provisionForwardHeaders collects the handler's own headers that are not
// forwarded: signature headers of its verifiers, the idempotency aliases
// (the Idempotency-Key sent is the edge's) and the token headers.
func (h *Handler) provisionForwardHeaders() {
	h.forwardSkip = map[string]bool{}
	for _, n := range h.signatureHeaders() {
		h.forwardSkip[http.CanonicalHeaderKey(n)] = true
	}
	for _, n := range h.idemHeaders {
		h.forwardSkip[n] = true
	}
	for _, n := range h.tokenHeaders { // x-service-token and the token_headers aliases
		h.forwardSkip[n] = true
	}
}

// forwardHeader returns the sender's headers that the gateway may read,
// in a new map whose value slices are the request's (never modified).
func (h *Handler) forwardHeader(src http.Header) http.Header {
	var listed map[string]bool // names the Connection header marks hop-by-hop
	for _, v := range src["Connection"] {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				if listed == nil {
					listed = map[string]bool{}
				}
				listed[http.CanonicalHeaderKey(n)] = true
			}
		}
	}
	out := make(http.Header, len(src))
	for k, v := range src {
		ck := http.CanonicalHeaderKey(k) // no copy when k is canonical, as the server makes it
		if forwardDropped[ck] || h.forwardSkip[ck] || listed[ck] || hasAnyPrefix(ck, forwardDroppedPrefixes) {
			continue
		}
		out[k] = v[:len(v):len(v)]
	}
	return out
}

// hasAnyPrefix reports whether the canonical header name s starts with
// one of prefixes.
func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// forwardQuery returns raw without its token-like parameters, keeping the
// others in order and as encoded.
func forwardQuery(raw string) string {
	if raw == "" {
		return ""
	}
	var b strings.Builder
	for rest := raw; rest != ""; {
		var part string
		part, rest, _ = strings.Cut(rest, "&")
		if part == "" {
			continue
		}
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if tokenLikeParam(name) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(part)
	}
	return b.String()
}

// Query parameter names that carry a credential: exact names (compared
// lower-cased without separators) and fragments.
var (
	tokenLikeNames = map[string]bool{
		"token": true, "accesstoken": true, "authtoken": true, "auth": true, "authorization": true,
		"apikey": true, "key": true, "secret": true, "clientsecret": true, "password": true,
		"passwd": true, "pwd": true, "signature": true, "sig": true, "sign": true, "hmac": true,
		"credential": true, "credentials": true, "bearer": true, "jwt": true,
	}
	tokenLikeFragments = []string{"token", "secret", "password", "apikey", "signature"}
)

// tokenLikeParam reports whether a query parameter name looks like it
// carries a credential.
func tokenLikeParam(name string) bool {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(name)) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	n := b.String()
	if tokenLikeNames[n] {
		return true
	}
	for _, f := range tokenLikeFragments {
		if strings.Contains(n, f) {
			return true
		}
	}
	return false
}

// withField returns the JSON object body with "name":value added as its
// first member (the caller has checked that body is an object without
// that member). The rest of the body is kept byte for byte.
func withField(body []byte, name, value string) []byte {
	obj := trimJSSpace(body)
	rest := []byte("}")
	if len(obj) > 0 && obj[0] == '{' {
		rest = obj[1:]
	}
	out := make([]byte, 0, len(rest)+len(name)+len(value)+8)
	out = append(out, '{')
	out = appendJSONString(out, name)
	out = append(out, ':')
	out = appendJSONString(out, value)
	if r := bytes.TrimLeft(rest, " \t\r\n"); len(r) > 0 && r[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// trimJSSpace trims what JavaScript's trim does (see jsTrim) from b.
func trimJSSpace(b []byte) []byte {
	if len(b) == 0 || b[0] > ' ' && b[0] < 0x80 && b[len(b)-1] > ' ' && b[len(b)-1] < 0x80 {
		return b
	}
	return bytes.TrimFunc(b, isJSSpace)
}
