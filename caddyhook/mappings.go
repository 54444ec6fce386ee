package caddyhook

import (
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/caddyhook/caddyhook/internal/tmpl"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// compiledMapping is a Mapping parsed and checked at provision; the
// request path only evaluates it.
type compiledMapping struct {
	id   string
	path string // trimmed; "" = any
	// gwPath is a forward mapping's path percent-encoded, as the gateway
	// compares its match.path with the hook name it reads (café as
	// caf%C3%A9).
	gwPath    string
	source    string
	expr      *tmpl.Expr
	kind      Kind
	wakeMode  string // "" when not set
	name      *tmpl.Template
	agentID   *tmpl.Template
	key       *tmpl.Template
	message   *tmpl.Template
	text      *tmpl.Template
	channel   *tmpl.Template
	to        *tmpl.Template
	model     *tmpl.Template
	thinking  *tmpl.Template
	deliver   *bool
	timeout   int
	unsafe    bool
	forEach   string
	maxBody   int64 // as configured; 0 = the handler's max_body
	bodyLimit int64 // effective
	transform *mappingTransform
	verifier  *verify.Verifier
	needToken bool // the hook token is required (no verify, or require_token)
	// forward: the hook's request is forwarded as sent (forward mapping or
	// a preset in forward mode).
	forward bool
	// policy decodes the rendered fields with the gateway's rules.
	policy *Policy
	// readsHeaders and readsQuery say whether an expression, template or
	// transform of the mapping can see the request headers or the query.
	readsHeaders bool
	readsQuery   bool
	// nfields is the number of fields render can produce: a map of that
	// size hint stays small.
	nfields int
}

// templated reports whether a field template has placeholders.
func templated(t *tmpl.Template) bool { return t != nil && !t.IsStatic() }

// compileMapping parses one mapping. n is its 1-based position (for the
// default id); errors name the mapping.
func (h *Handler) compileMapping(m *Mapping, n int, env *tmpl.Env) (*compiledMapping, error) {
	c := &compiledMapping{id: strings.TrimSpace(m.ID), path: strings.Trim(strings.TrimSpace(m.MatchPath), "/"),
		source: strings.TrimSpace(m.MatchSource), deliver: m.Deliver, timeout: m.TimeoutSeconds,
		unsafe: m.AllowUnsafeExternalContent, forEach: strings.TrimSpace(m.ForEach), maxBody: m.MaxBody, policy: h.policy}
	if c.id == "" {
		c.id = fmt.Sprintf("mapping-%d", n)
	}
	fail := func(field string, err error) error { return fmt.Errorf("mapping %s: %s: %w", c.id, field, err) }
	if m.Forward {
		return c, compileForward(c, m, env, fail)
	}
	switch strings.TrimSpace(m.Action) {
	case "", "agent":
		c.kind = KindAgent
	case "wake":
		c.kind = KindWake
	default:
		return nil, fail("action", fmt.Errorf("%q must be agent or wake", m.Action))
	}
	switch wm := strings.TrimSpace(m.WakeMode); wm {
	case "", modeNow, modeNextHeartbeat:
		c.wakeMode = wm
	default:
		return nil, fail("wake_mode", fmt.Errorf("%q must be now or next-heartbeat", m.WakeMode))
	}
	if c.path == routeWake || c.path == routeAgent {
		return nil, fail("match_path", fmt.Errorf("%q is a built-in hook and cannot be mapped", c.path))
	}
	if m.TimeoutSeconds < 0 {
		return nil, fail("timeout_seconds", fmt.Errorf("must be positive"))
	}
	if m.MaxBody < 0 || m.MaxBody > maxMappingBody {
		return nil, fail("max_body", fmt.Errorf("must be between 1 byte and 64 MiB"))
	}
	if c.forEach != "" && (strings.ContainsAny(c.forEach, ".[]") || blockedKey(c.forEach)) {
		return nil, fail("for_each", fmt.Errorf("%q must be a top-level payload key", c.forEach))
	}
	if m.MatchExpr != "" {
		x, err := env.CompileBool(m.MatchExpr)
		if err != nil {
			return nil, fail("match_expr", err)
		}
		c.expr = x
	}
	for _, f := range []struct {
		field string
		src   string
		dst   **tmpl.Template
	}{
		{"name", m.Name, &c.name}, {"agent_id", m.AgentID, &c.agentID}, {"session_key", m.SessionKey, &c.key},
		{"message_template", m.MessageTemplate, &c.message}, {"text_template", m.TextTemplate, &c.text},
		{"channel", m.Channel, &c.channel}, {"to", m.To, &c.to}, {"model", m.Model, &c.model},
		{"thinking", m.Thinking, &c.thinking},
	} {
		if f.src == "" {
			continue
		}
		t, err := tmpl.Compile(f.src, env)
		if err != nil {
			return nil, fail(f.field, err)
		}
		*f.dst = t
		c.nfields++
	}
	if c.wakeMode != "" {
		c.nfields += 2 // wakeMode and mode
	}
	if c.deliver != nil {
		c.nfields++
	}
	if c.timeout > 0 {
		c.nfields++
	}
	c.readsHeaders, c.readsQuery = m.Transform != nil, m.Transform != nil
	for _, src := range []string{m.MatchExpr, m.Name, m.AgentID, m.SessionKey, m.MessageTemplate, m.TextTemplate,
		m.Channel, m.To, m.Model, m.Thinking} {
		// both the reference grammar (headers.x) and CEL (headers["x"])
		// name the variables literally
		c.readsHeaders = c.readsHeaders || strings.Contains(src, varHeaders)
		c.readsQuery = c.readsQuery || strings.Contains(src, varQuery)
	}
	if m.Transform == nil {
		switch {
		case c.kind == KindAgent && c.message == nil:
			return nil, fail("message_template", fmt.Errorf("required for an agent mapping without a transform"))
		case c.kind == KindWake && c.text == nil:
			return nil, fail("text_template", fmt.Errorf("required for a wake mapping without a transform"))
		}
	}
	return c, nil
}

// compileForward checks and compiles a forward mapping: its match
// conditions and limits; every field that would shape an action is
// refused (the gateway's own mapping shapes it).
func compileForward(c *compiledMapping, m *Mapping, env *tmpl.Env, fail func(string, error) error) error {
	c.forward = true
	for _, f := range []struct {
		field string
		set   bool
	}{
		{"action", m.Action != ""}, {"wake_mode", m.WakeMode != ""}, {"name", m.Name != ""},
		{"agent_id", m.AgentID != ""}, {"session_key", m.SessionKey != ""},
		{"message_template", m.MessageTemplate != ""}, {"text_template", m.TextTemplate != ""},
		{"channel", m.Channel != ""}, {"to", m.To != ""}, {"model", m.Model != ""}, {"thinking", m.Thinking != ""},
		{"deliver", m.Deliver != nil}, {"timeout_seconds", m.TimeoutSeconds != 0},
		{"allow_unsafe_external_content", m.AllowUnsafeExternalContent}, {"for_each", m.ForEach != ""},
		{"transform", m.Transform != nil},
	} {
		if f.set {
			return fail(f.field, fmt.Errorf("not allowed with forward (the gateway's own mapping shapes the forwarded hook); use match_path, match_source, match_expr, max_body, verify or require_token"))
		}
	}
	switch {
	case c.path == "":
		// like the gateway's mapping without match.path: every hook name
		// (that the edge can forward as is; see answers)
	case c.path == routeWake || c.path == routeAgent:
		return fail("match_path", fmt.Errorf("%q is a built-in hook and cannot be mapped", c.path))
	case !forwardableMatchPath(c.path):
		return fail("match_path", fmt.Errorf("%q is not a plain hook path", c.path))
	case m.MaxBody < 0 || m.MaxBody > 64<<20:
		return fail("max_body", fmt.Errorf("must be between 1 byte and 64 MiB"))
	}
	c.gwPath = strings.TrimPrefix((&url.URL{Path: "/" + c.path}).EscapedPath(), "/")
	if m.MatchExpr != "" {
		x, err := env.CompileBool(m.MatchExpr)
		if err != nil {
			return fail("match_expr", err)
		}
		c.expr = x
		c.readsHeaders = strings.Contains(m.MatchExpr, varHeaders)
		c.readsQuery = strings.Contains(m.MatchExpr, varQuery)
	}
	return nil
}

// validHookPath reports whether p is a plain path: segments of URL path
// characters that need no escaping, no dot segments.
func validHookPath(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." || url.PathEscape(seg) != seg {
			return false
		}
	}
	return true
}

// forwardableMatchPath reports whether a forward mapping can answer the
// hook name p. Names are compared decoded (as the request path is) and
// escaped again on the way to the gateway, so p may hold any printable
// character but ? and #, in segments that are not empty, . or ..
func forwardableMatchPath(p string) bool {
	if !utf8.ValidString(p) || strings.ContainsAny(p, "?#") || strings.ContainsFunc(p, unicode.IsControl) {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// blockedKey reports the keys templates never resolve.
func blockedKey(k string) bool {
	return k == "__proto__" || k == "prototype" || k == "constructor"
}

// answers reports whether c's match_path admits ex's hook name. A
// mapping without match_path admits every name. A forward mapping
// compares its path, percent-encoded, with the name the gateway reads
// (gatewayName: escapes kept as sent), as the gateway compares its
// match.path, so that the edge picks the mapping the gateway picks; it
// admits only names the edge can forward as sent.
func (h *Handler) answers(c *compiledMapping, ex *exchange) bool {
	if !c.forward {
		return c.path == "" || c.path == ex.sub
	}
	name, ok := h.gatewayName(ex)
	return ok && (c.path == "" || c.gwPath == name)
}

// matches reports whether c's source and CEL conditions hold (CEL last);
// the caller has checked answers.
func (c *compiledMapping) matches(vars *tmpl.Vars) (bool, error) {
	if c.source != "" {
		if s, _ := vars.Payload["source"].(string); s != c.source {
			return false, nil
		}
	}
	if c.expr != nil {
		return c.expr.Match(vars)
	}
	return true, nil
}

// render produces the fields object of one action: the rendered
// templates (trimmed; empty ones left out) and the static settings.
func (c *compiledMapping) render(vars *tmpl.Vars) (fields, *hookError) {
	f := make(fields, c.nfields)
	for _, t := range []struct {
		key string
		t   *tmpl.Template
	}{
		{"name", c.name}, {"agentId", c.agentID}, {"sessionKey", c.key}, {"message", c.message},
		{"text", c.text}, {"channel", c.channel}, {"to", c.to}, {"model", c.model}, {"thinking", c.thinking},
	} {
		if t.t == nil {
			continue
		}
		s, err := t.t.RenderString(vars)
		if err != nil {
			return nil, c.failed()
		}
		if s = strings.TrimSpace(s); s != "" {
			f[t.key] = s
		} else if t.key == "sessionKey" {
			return nil, reject(http.StatusBadRequest, "hook mapping "+c.id+": sessionKey template rendered empty")
		}
	}
	if c.wakeMode != "" {
		f["wakeMode"], f["mode"] = c.wakeMode, c.wakeMode
	}
	if c.deliver != nil {
		f["deliver"] = *c.deliver
	}
	if c.timeout > 0 {
		f["timeoutSeconds"] = float64(c.timeout)
	}
	return f, nil
}

// failed is the 400 for a mapping whose CEL or template evaluation failed;
// it names the mapping and never the payload.
func (c *compiledMapping) failed() *hookError {
	return reject(http.StatusBadRequest, "hook mapping failed: "+c.id)
}

// action decodes rendered (and transformed) fields with the same rules as
// the built-in endpoints. keyFromRequest marks a session key that a
// template or transform produced.
func (c *compiledMapping) action(kind Kind, f fields, keyFromRequest bool, unsafe bool, source string) (Action, *hookError) {
	var (
		a   Action
		err error
	)
	if kind == KindWake {
		a, err = decodeWake(f)
	} else {
		a, err = c.policy.decodeAgent(f)
	}
	switch err {
	case nil:
	case errTextRequired:
		return a, reject(http.StatusBadRequest, "hook mapping "+c.id+" requires text")
	case errMessageRequired:
		return a, reject(http.StatusBadRequest, "hook mapping "+c.id+" requires message")
	default:
		return a, reject(http.StatusBadRequest, err.Error())
	}
	if a.SessionKey != "" && !keyFromRequest {
		a.keySource = keyOperator
	}
	a.AllowUnsafe = unsafe
	a.Source = source
	return a, nil
}

// Variable names templates and CEL expressions use for the request
// headers and query.
const (
	varHeaders = "headers"
	varQuery   = "query"
)

// requestVars gathers what templates, CEL and transforms see for a
// request. Headers and query are gathered only when a mapping that could
// answer the hook name reads them. The hook token's headers are left out:
// no template or script can copy the token into a message.
func (h *Handler) requestVars(ex *exchange) *tmpl.Vars {
	var needHeaders, needQuery bool
	for _, c := range h.mappings {
		if h.answers(c, ex) {
			needHeaders = needHeaders || c.readsHeaders
			needQuery = needQuery || c.readsQuery
		}
	}
	v := &tmpl.Vars{Payload: ex.payload, Path: ex.sub, Now: ex.now}
	if needHeaders {
		v.Headers = h.templateHeaders(ex.r.Header)
	}
	if needQuery && ex.r.URL.RawQuery != "" {
		v.Query = templateQuery(ex.r.URL.Query())
	}
	return v
}

// templateHeaders maps lower-cased header names to their values (joined
// with ", " when repeated), without the hook token's headers
// (Authorization, x-service-token and the token_headers aliases).
func (h *Handler) templateHeaders(hdr http.Header) map[string]string {
	headers := make(map[string]string, len(hdr))
	for k, v := range hdr {
		if c := textproto.CanonicalMIMEHeaderKey(k); c == "Authorization" || h.isTokenHeader(c) {
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	return headers
}

// templateQuery maps query parameter names to their first value.
func templateQuery(q url.Values) map[string]string {
	query := make(map[string]string, len(q))
	for k, v := range q {
		if len(v) > 0 {
			query[k] = v[0]
		}
	}
	return query
}
