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
	kind actionKind // wake for /wake, agent for the rest (the spooled reply's shape)
	// lane is the spool lane: kind, or a forward mapping's action (a wake
	// mapping's requests keep acceptance order, as /wake's do)
	lane actionKind
	// path is the gateway path and query: the gateway prefix, the
	// sender's path below the base as the gateway reads it, and the query
	// as sent (forwarder.target).
	path string
	// header is what of the sender's headers crosses (crossingHeaders).
	header http.Header
	body   []byte // the sender's body (a provider's form or encrypted body: the JSON it stands for)
	// mode is a /wake request's mode (a spooled wake's reply names it).
	mode string
	// wait and timeoutSeconds are an /agent request's waitForCompletion
	// and timeoutSeconds: the gateway holds the answer until the run ends.
	wait           bool
	timeoutSeconds int64
	// keySource says who chose the session key of the /wake or /agent
	// request the policy resolved (withSessionKey).
	keySource keySource
}

// reasonNotForwardable is the 404 of a hook path the gateway would read
// as another name than the edge routed (a dot segment, a base path sent
// percent-encoded).
const reasonNotForwardable = "hook path cannot be forwarded as sent"

// forwarder builds the requests the edge forwards as sent: the gateway
// path (the base path's part as the gateway reads it, the query as sent),
// the headers that cross (forward_headers.go) and, at dispatch, the
// gateway request with its idempotency key. Immutable after
// newForwarder.
type forwarder struct {
	base    string
	gateway *gatewayClient
	// skip are the handler's own headers that a forwarded request leaves
	// out (its token header aliases, its verifiers' signature headers).
	skip map[string]bool
	// spooled: a spool holds the request until it is delivered, so one
	// without an idempotency key the gateway reads gets its event id as
	// one (see prepare).
	spooled bool
}

// newForwarder collects the handler's own credential headers, which
// never cross whatever their names: its token header aliases
// (x-service-token and token_headers) and its verifiers' signature
// headers.
func newForwarder(base string, gw *gatewayClient, signatureHeaders, tokenHeaders []string, spooled bool) *forwarder {
	f := &forwarder{base: base, gateway: gw, skip: map[string]bool{}, spooled: spooled}
	for _, n := range signatureHeaders {
		f.skip[http.CanonicalHeaderKey(n)] = true
	}
	for _, n := range tokenHeaders {
		f.skip[n] = true
	}
	return f
}

// plan is the forward plan of ex: its gateway path and the headers that
// cross; acts is the validated /wake or /agent request, if that is what
// is forwarded (a forward mapping's hook has none: lane is the mapping's
// action).
func (fw *forwarder) plan(ex *exchange, acts []action, lane actionKind) (forwardReq, *hookError) {
	kind := kindAgent
	if len(acts) == 1 {
		kind, lane = acts[0].Kind, acts[0].Kind
	}
	path, ok := fw.target(ex)
	if !ok {
		return forwardReq{}, reject(http.StatusNotFound, reasonNotForwardable)
	}
	hdr, herr := crossingHeaders(ex.r, path, fw.skip)
	if herr != nil {
		return forwardReq{}, herr
	}
	if ex.r.ContentLength < 0 {
		// sent chunked: so it reaches the gateway (gatewayClient.send
		// reads the mark; a spool keeps it with the headers)
		hdr[headerChunked] = []string{"chunked"}
	}
	f := forwardReq{name: ex.sub, kind: kind, lane: lane, path: path, header: hdr, body: ex.dispatchBody()}
	if ex.payloadJSON != nil || !isJSONContentType(ex.r.Header.Get("Content-Type")) {
		// the gateway takes JSON only: a provider's form (or encrypted,
		// or array) body crosses as the JSON object it stands for, and
		// JSON a provider posts as another type (SNS's text/plain) as JSON
		hdr["Content-Type"] = []string{"application/json"}
	}
	if len(acts) == 1 {
		a := &acts[0]
		f.mode, f.wait, f.timeoutSeconds = a.Mode, a.Wait, a.TimeoutSeconds
	}
	return f, nil
}

// withSessionKey sets the edge's own default_session_key in the body of
// a forwarded /agent request that the policy resolved a to, as the last
// member: it wins over a sessionKey the policy read as none (null, "",
// blank), which the gateway would otherwise read last; the gateway
// resolves every other omitted field itself. It records who chose the
// key, for a replay.
func (f *forwardReq) withSessionKey(a *action) {
	f.keySource = a.keySource
	if a.Kind == kindAgent && a.keySource == keyNone && a.SessionKey != "" {
		f.body = withField(f.body, "sessionKey", a.SessionKey)
	}
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

// target returns the gateway path and query of a forwarded request: the
// gateway prefix, then the sender's path below the base as the gateway's
// own URL parser reads it (gatewayRest: an escaped name stays escaped, so
// a hook name such as %E2%9C%93 reaches the gateway as the gateway would
// have seen it), then the query exactly as sent (every parameter: only
// the edge's own token parameters are refused, earlier). ok is false when
// the gateway would read another name than the edge routed.
func (fw *forwarder) target(ex *exchange) (string, bool) {
	rest, ok := ex.gatewayRest(fw.base)
	if !ok {
		return "", false
	}
	q := ex.r.URL.RawQuery
	if q != "" && strings.Contains(requestTarget(ex.r), "#") {
		// a '?' after a raw '#' is the fragment's: no query to the gateway
		if t := requestTarget(ex.r); strings.IndexByte(t, '#') < strings.IndexByte(t, '?') {
			q = ""
		}
	}
	switch {
	case q == "" && rest == "/"+routeWake:
		return fw.gateway.kindPath(kindWake), true // no allocation on the common paths
	case q == "" && rest == "/"+routeAgent:
		return fw.gateway.kindPath(kindAgent), true
	case q == "":
		return fw.gateway.prefixed(rest), true
	}
	return fw.gateway.prefixed(rest + "?" + q), true
}

// prepare builds the gateway request of f: the body as sent to
// f.path with the headers that cross. An Idempotency-Key is the sender's
// own, if any, under the name the sender used; with a spool, a request
// that carries no key the gateway reads (the Idempotency-Key or
// X-OpenClaw-Idempotency-Key header, the idempotencyKey field) gets the
// event id as its Idempotency-Key, so that a redelivery after a lost
// answer does not run twice. eventID is the idempotent request's
// deterministic event id, or "" for a random one.
func (fw *forwarder) prepare(ex *exchange, f *forwardReq, eventID string) prepared {
	if eventID == "" {
		eventID = uuid.NewString()
	}
	g := gatewayRequest{kind: f.kind, path: f.path, header: f.header, body: f.body, idemKey: eventID}
	if fw.spooled && !gatewayHasIdemKey(f.header, ex.payload) {
		for _, name := range []string{"Idempotency-Key", headerOpenClawIdemKey} {
			if _, sent := f.header[name]; !sent {
				f.header[name] = []string{eventID}
				break
			}
		}
	}
	if f.wait {
		g.timeout = fw.gateway.waitTimeoutFor(f.timeoutSeconds)
	}
	return prepared{gatewayRequest: g, mode: f.mode, eventID: eventID, forward: true, wakeLane: f.lane == kindWake, keySource: f.keySource}
}

// headerChunked marks, in a forwarded request's headers, a body the
// sender sent chunked (Transfer-Encoding: chunked, no Content-Length):
// the gateway client sends it chunked too. The name is the one the
// transport never writes from a header map, so an earlier release that
// delivers a spooled event with the mark sends it with Content-Length,
// as before.
const headerChunked = "Transfer-Encoding"

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
