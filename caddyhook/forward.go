package caddyhook

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/google/uuid"
)

// forwardReq is a request the edge forwards to the gateway as the sender
// sent it, for a gateway that resolves it with its own hooks config: a
// /wake or /agent request in forward mode, or a hook of a forward mapping.
type forwardReq struct {
	name string     // the hook name as the edge routed it: wake, agent or the hook path
	kind actionKind // the spool lane: wake for /wake, agent for the rest
	// path is the gateway path and query: the gateway prefix, the
	// sender's path below the base as the gateway reads it, and the query
	// as sent (forwardTarget).
	path string
	// header is what of the sender's headers crosses (crossingHeaders).
	header http.Header
	body   []byte // the sender's body
	// mode is a /wake request's mode (a spooled wake's reply names it).
	mode string
	// wait and timeoutSeconds are an /agent request's waitForCompletion
	// and timeoutSeconds: the gateway holds the answer until the run ends.
	wait           bool
	timeoutSeconds int64
}

// reasonNotForwardable is the 404 of a hook path the gateway would read
// as another name than the edge routed (a dot segment, a base path sent
// percent-encoded).
const reasonNotForwardable = "hook path cannot be forwarded as sent"

// newForward is the forward plan of ex: its gateway path and the headers
// that cross.
func (h *Handler) newForward(ex *exchange, kind actionKind) (forwardReq, *hookError) {
	path, ok := h.forwardTarget(ex)
	if !ok {
		return forwardReq{}, reject(http.StatusNotFound, reasonNotForwardable)
	}
	hdr, herr := h.crossingHeaders(ex.r, path)
	if herr != nil {
		return forwardReq{}, herr
	}
	return forwardReq{name: ex.sub, kind: kind, path: path, header: hdr, body: ex.body}, nil
}

// forwardBuiltin is the forward plan of a validated /wake or /agent
// request.
func (h *Handler) forwardBuiltin(ex *exchange, a *action) (forwardReq, *hookError) {
	f, herr := h.newForward(ex, a.Kind)
	f.mode, f.wait, f.timeoutSeconds = a.Mode, a.Wait, a.TimeoutSeconds
	return f, herr
}

// seed derives the request's event id from its idempotency key and what
// the gateway receives (path, query and body), so that a replay, even
// after a restart, reaches the gateway with the same id.
func (f *forwardReq) seed(key string) string {
	buf := make([]byte, 0, len(key)+len(f.path)+len(f.body)+2)
	buf = append(buf, key...)
	buf = append(buf, 0)
	buf = append(buf, f.path...)
	buf = append(buf, 0)
	buf = append(buf, f.body...)
	return uuid.NewSHA1(eventNamespace, buf).String()
}

// forwardTarget returns the gateway path and query of a forwarded
// request: the gateway prefix, then the sender's path below the base as
// the gateway's own URL parser reads it (gatewayRest: an escaped name
// stays escaped, so a hook name such as %E2%9C%93 reaches the gateway as
// the gateway would have seen it), then the query exactly as sent (every
// parameter: only the edge's own token parameters are refused, earlier).
// ok is false when the gateway would read another name than the edge
// routed.
func (h *Handler) forwardTarget(ex *exchange) (string, bool) {
	rest, ok := h.forwardRest(ex)
	if !ok {
		return "", false
	}
	q := ex.r.URL.RawQuery
	switch {
	case q == "" && rest == "/"+routeWake:
		return h.gateway.paths[kindWake], true // no allocation on the common paths
	case q == "" && rest == "/"+routeAgent:
		return h.gateway.paths[kindAgent], true
	case q == "":
		return h.gateway.prefix + rest, true
	}
	return h.gateway.prefix + rest + "?" + q, true
}

// forwardRest is gatewayRest of ex's request target, computed once.
func (h *Handler) forwardRest(ex *exchange) (string, bool) {
	if !ex.gwDone {
		ex.gwRest, ex.gwOK = gatewayRest(requestTarget(ex.r), h.base)
		ex.gwDone = true
	}
	return ex.gwRest, ex.gwOK
}

// gatewayName is the hook name the gateway reads from ex's path (its
// sub-path with the slashes around it trimmed, as the gateway compares it
// with a mapping's match.path); ok is false when forwardTarget refuses the
// path.
func (h *Handler) gatewayName(ex *exchange) (string, bool) {
	rest, ok := h.forwardRest(ex)
	return strings.Trim(rest, "/"), ok
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
	if strings.IndexFunc(p, needsGatewayEscape) >= 0 {
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
		p = b.String()
	}
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

// prepareForward builds the gateway request of f: the body as sent to
// f.path with the headers that cross. An Idempotency-Key is the sender's
// own, if any, under the name the sender used; with a spool, a request
// that carries no key the gateway reads (the Idempotency-Key or
// X-OpenClaw-Idempotency-Key header, the idempotencyKey field) gets the
// event id as its Idempotency-Key, so that a redelivery after a lost
// answer does not run twice. eventID is the idempotent request's
// deterministic event id, or "" for a random one.
func (h *Handler) prepareForward(ex *exchange, f *forwardReq, eventID string) prepared {
	if eventID == "" {
		eventID = uuid.NewString()
	}
	g := gatewayRequest{kind: f.kind, path: f.path, header: f.header, body: f.body, idemKey: eventID}
	if h.Spool != nil && !gatewayHasIdemKey(f.header, ex.payload) {
		for _, name := range []string{"Idempotency-Key", headerOpenClawIdemKey} {
			if _, sent := f.header[name]; !sent {
				f.header[name] = []string{eventID}
				break
			}
		}
	}
	if f.wait {
		g.timeout = h.gateway.waitTimeoutFor(f.timeoutSeconds)
	}
	return prepared{gatewayRequest: g, mode: f.mode, eventID: eventID, forward: true}
}

// headerOpenClawIdemKey is the gateway's own idempotency header.
const headerOpenClawIdemKey = "X-Openclaw-Idempotency-Key"

// gatewayHasIdemKey reports whether the gateway finds an idempotency key
// in a forwarded request, reading it as the gateway does: the
// Idempotency-Key header, else X-OpenClaw-Idempotency-Key, else the
// body's idempotencyKey string; trimmed, 1 to 256 characters.
func gatewayHasIdemKey(hdr http.Header, payload map[string]any) bool {
	for _, name := range []string{"Idempotency-Key", headerOpenClawIdemKey} {
		if v, ok := hdr[name]; ok && usableIdemKey(strings.Join(v, ", ")) != "" {
			return true
		}
	}
	s, _ := payload["idempotencyKey"].(string)
	return usableIdemKey(s) != ""
}

// withField returns the JSON object body with "name":value added as its
// last member, so that it wins over any member of that name the body
// already has (the gateway's JSON.parse keeps the last of duplicate
// names). The rest of the body is kept byte for byte, surrounding white
// space aside.
func withField(body []byte, name, value string) []byte {
	obj := trimJSSpace(body)
	head := []byte("{")
	if n := len(obj); n > 0 && obj[n-1] == '}' {
		head = obj[:n-1]
	}
	out := make([]byte, 0, len(head)+len(name)+len(value)+8)
	out = append(out, head...)
	if h := bytes.TrimRight(head, " \t\r\n"); len(h) > 0 && h[len(h)-1] != '{' {
		out = append(out, ',')
	}
	out = appendJSONString(out, name)
	out = append(out, ':')
	out = appendJSONString(out, value)
	return append(out, '}')
}

// trimJSSpace trims what JavaScript's trim does (see jsTrim) from b.
func trimJSSpace(b []byte) []byte {
	if len(b) == 0 || b[0] > ' ' && b[0] < 0x80 && b[len(b)-1] > ' ' && b[len(b)-1] < 0x80 {
		return b
	}
	return bytes.TrimFunc(b, isJSSpace)
}
