package caddyhook

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddyhook/caddyhook/internal/secret"
	"github.com/caddyhook/caddyhook/internal/tmpl"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// Built-in hook names.
const (
	routeWake  = "wake"
	routeAgent = "agent"
)

// router resolves a request's hook name to what it asks for (route.go):
// wake and agent are built in, any other name goes through the compiled
// mappings, configured ones before presets, with their signature
// verifiers (signature.go) and body limits. Compiled by newRouter at
// provision, immutable after.
type router struct {
	mappings     []*compiledMapping
	verifyAny    bool             // a signing mapping answers every hook name
	handshakes   bool             // a signing mapping's provider has a handshake
	verifyPaths  map[string]bool  // hook names a signing mapping answers
	pathLimits   map[string]int64 // body read limit per mapped hook name
	anyPathLimit int64            // body read limit of any other hook name
	maxBody      int64            // max_body: wake, agent and unmapped names
	// sigHeaders are the headers of every verify block, once each.
	sigHeaders []string
	// base is the handler's base path: a forward mapping matches the
	// hook name as the gateway reads it below base.
	base string
	// forward: mode forward (wake and agent are forwarded as sent).
	forward         bool
	allowRequestKey bool // allow_request_session_key
	policy          *policy
	tokens          *tokenChecker // the token headers stay out of templates
	logger          *zap.Logger
	debug           bool // logger logs at debug level: requests collect exchange.passed
}

// routerConfig is what newRouter compiles.
type routerConfig struct {
	mappings        []Mapping
	presets         []string
	maxBody         int64
	celCostLimit    uint64
	base            string
	forward         bool
	allowRequestKey bool
	policy          *policy
	tokens          *tokenChecker
	transforms      *transformSet
	repl            *caddy.Replacer // expands the verify secrets
	verifyEnv       verify.Env      // what the verifiers may use (their HTTP client)
	logger          *zap.Logger
}

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
	kind      actionKind
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
	// handshake: the verifier's provider has an endpoint handshake,
	// answered at the edge; hsMethods are the methods other than POST it
	// comes with (GET, HEAD).
	handshake bool
	hsMethods []string
	// form: the verifier's provider posts application/x-www-form-urlencoded
	// bodies.
	form bool
	// forward: the hook's request is forwarded as sent (forward mapping or
	// a preset in forward mode).
	forward bool
	// policy decodes the rendered fields with the gateway's rules.
	policy *policy
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
func (rt *router) compileMapping(m *Mapping, n int, env *tmpl.Env) (*compiledMapping, error) {
	c := &compiledMapping{id: strings.TrimSpace(m.ID), path: strings.Trim(strings.TrimSpace(m.MatchPath), "/"),
		source: strings.TrimSpace(m.MatchSource), deliver: m.Deliver, timeout: m.TimeoutSeconds,
		unsafe: m.AllowUnsafeExternalContent, forEach: strings.TrimSpace(m.ForEach), maxBody: m.MaxBody, policy: rt.policy}
	if c.id == "" {
		c.id = fmt.Sprintf("mapping-%d", n)
	}
	fail := func(field string, err error) error { return fmt.Errorf("mapping %s: %s: %w", c.id, field, err) }
	switch strings.TrimSpace(m.Action) {
	case "", "agent":
		c.kind = kindAgent
	case "wake":
		c.kind = kindWake
	default:
		return nil, fail("action", fmt.Errorf("%q must be agent or wake", m.Action))
	}
	if m.Forward {
		return c, compileForward(c, m, env, fail)
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
	defaultTemplate, err := c.providerTemplate(m, env)
	if err != nil {
		return nil, fail("verify", err)
	}
	c.readsHeaders, c.readsQuery = m.Transform != nil, m.Transform != nil
	for _, src := range []string{m.MatchExpr, m.Name, m.AgentID, m.SessionKey, m.MessageTemplate, m.TextTemplate,
		m.Channel, m.To, m.Model, m.Thinking, defaultTemplate} {
		// both the reference grammar (headers.x) and CEL (headers["x"])
		// name the variables literally
		c.readsHeaders = c.readsHeaders || strings.Contains(src, varHeaders)
		c.readsQuery = c.readsQuery || strings.Contains(src, varQuery)
	}
	if m.Transform == nil {
		switch {
		case c.kind == kindAgent && c.message == nil:
			return nil, fail("message_template", fmt.Errorf("required for an agent mapping without a transform"))
		case c.kind == kindWake && c.text == nil:
			return nil, fail("text_template", fmt.Errorf("required for a wake mapping without a transform"))
		}
	}
	return c, nil
}

// providerTemplate gives a mapping with verify and without a transform
// its provider's default template where it sets none (the message of an
// agent mapping, the text of a wake one), so that `mapping shopify {
// verify shopify { … } }` alone reads "Shopify orders/create from …". It
// returns the template's source ("" when none was used).
func (c *compiledMapping) providerTemplate(m *Mapping, env *tmpl.Env) (string, error) {
	if m.Verify == nil || m.Transform != nil {
		return "", nil
	}
	dst := &c.message
	if c.kind == kindWake {
		dst = &c.text
	}
	if *dst != nil {
		return "", nil
	}
	info, ok := verify.Lookup(m.Verify.Scheme)
	if !ok || info.Template == "" {
		return "", nil // an unknown provider fails with attachVerifier
	}
	t, err := tmpl.Compile(info.Template, env)
	if err != nil {
		return "", fmt.Errorf("%s's default template: %w", info.Name, err)
	}
	*dst = t
	c.nfields++
	return info.Template, nil
}

// compileForward checks and compiles a forward mapping: its match
// conditions and limits; every field that would shape an action is
// refused (the gateway's own mapping shapes it). Its action (c.kind) is
// only the spool lane: a wake mapping's requests are delivered in
// acceptance order, as /wake's are.
func compileForward(c *compiledMapping, m *Mapping, env *tmpl.Env, fail func(string, error) error) error {
	c.forward = true
	for _, f := range []struct {
		field string
		set   bool
	}{
		{"wake_mode", m.WakeMode != ""}, {"name", m.Name != ""},
		{"agent_id", m.AgentID != ""}, {"session_key", m.SessionKey != ""},
		{"message_template", m.MessageTemplate != ""}, {"text_template", m.TextTemplate != ""},
		{"channel", m.Channel != ""}, {"to", m.To != ""}, {"model", m.Model != ""}, {"thinking", m.Thinking != ""},
		{"deliver", m.Deliver != nil}, {"timeout_seconds", m.TimeoutSeconds != 0},
		{"allow_unsafe_external_content", m.AllowUnsafeExternalContent}, {"for_each", m.ForEach != ""},
		{"transform", m.Transform != nil},
	} {
		if f.set {
			return fail(f.field, fmt.Errorf("not allowed with forward (the gateway's own mapping shapes the forwarded hook); use match_path, match_source, match_expr, max_body, verify, require_token or action"))
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
	// the name the gateway compares its match.path with: match_path as
	// the gateway's URL parser would leave it in a request path (café is
	// caf%C3%A9, a%2Fb stays as written, a|b is not escaped)
	c.gwPath = gatewayEscape(c.path)
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

// forwardableMatchPath reports whether a forward mapping can answer the
// hook name p. It is compared as the gateway's URL parser leaves it
// (gatewayEscape) with the name the gateway reads, so p may hold any
// printable character but ? and #, in segments that are not empty, . or
// ..
func forwardableMatchPath(p string) bool {
	if !utf8.ValidString(p) || strings.ContainsAny(p, "?#") || strings.ContainsFunc(p, unicode.IsControl) {
		return false
	}
	for seg := range strings.SplitSeq(p, "/") {
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

// Variable names templates and CEL expressions use for the request
// headers and query.
const (
	varHeaders = "headers"
	varQuery   = "query"
)

// maxMappingBody is the largest body limit a mapping may ask for.
const maxMappingBody = 64 << 20

// newRouter compiles the configured mappings and then the presets (in
// that order: first match wins), their verifiers and transforms, and
// derives the body limit of each hook name.
func newRouter(cfg routerConfig) (*router, error) {
	rt := &router{maxBody: cfg.maxBody, base: cfg.base, forward: cfg.forward, allowRequestKey: cfg.allowRequestKey,
		policy: cfg.policy, tokens: cfg.tokens, logger: cfg.logger, debug: cfg.logger != nil && cfg.logger.Core().Enabled(zapcore.DebugLevel)}
	presets, err := presetMappings(cfg.presets)
	if err != nil {
		return nil, err
	}
	if cfg.forward {
		// the gateway runs its own presets: forward their hooks
		for i, p := range presets {
			presets[i] = Mapping{ID: p.ID, MatchPath: p.MatchPath, MaxBody: p.MaxBody, Forward: true}
		}
	}
	all := append(slices.Clone(cfg.mappings), presets...)
	rt.verifyPaths = map[string]bool{}
	rt.pathLimits = map[string]int64{}
	rt.anyPathLimit = cfg.maxBody
	for _, m := range cfg.mappings {
		if m.Verify == nil {
			continue
		}
		for _, n := range verify.SignatureHeaders(*m.Verify) {
			if !slices.Contains(rt.sigHeaders, n) {
				rt.sigHeaders = append(rt.sigHeaders, n)
			}
		}
	}
	if len(all) == 0 {
		return rt, nil
	}
	env, err := tmpl.NewEnv(cfg.celCostLimit)
	if err != nil {
		return nil, fmt.Errorf("mappings: %w", err)
	}
	ids := make(map[string]bool, len(all))
	for i := range all {
		m := &all[i]
		c, err := rt.compileMapping(m, i+1, env)
		if err != nil {
			return nil, err
		}
		if ids[c.id] {
			return nil, fmt.Errorf("mapping %s: id: used by an earlier mapping", c.id)
		}
		ids[c.id] = true
		if err := rt.checkMappingKey(c); err != nil {
			return nil, err
		}
		if err := rt.attachVerifier(c, m, cfg.repl, cfg.verifyEnv); err != nil {
			return nil, err
		}
		if m.Transform != nil {
			if c.transform, err = cfg.transforms.compile(c.id, m.Transform); err != nil {
				return nil, err
			}
		}
		c.bodyLimit = cfg.maxBody
		if c.maxBody > 0 {
			c.bodyLimit = c.maxBody
		}
		if c.path == "" {
			rt.anyPathLimit = max(rt.anyPathLimit, c.bodyLimit)
		} else {
			rt.pathLimits[c.path] = max(rt.pathLimits[c.path], c.bodyLimit)
		}
		if by := shadowedBy(rt.mappings, c); by != "" {
			rt.logger.Warn("mapping can never match: an earlier mapping answers every request it would",
				zap.String("mapping", c.id), zap.String("shadowed_by", by))
		}
		rt.mappings = append(rt.mappings, c)
	}
	return rt, nil
}

// checkMappingKey applies the provision-time session key rules: a
// templated key is request-supplied, so it needs allow_request_session_key
// and allowed_session_key_prefixes; a static key must fit the prefixes.
func (rt *router) checkMappingKey(c *compiledMapping) error {
	switch {
	case c.key == nil:
		return nil
	case templated(c.key) && !rt.policy.hasPrefixes():
		return fmt.Errorf("mapping %s: session_key: a templated session key needs allowed_session_key_prefixes", c.id)
	case templated(c.key) && !rt.allowRequestKey:
		return fmt.Errorf("mapping %s: session_key: a templated session key counts as request-supplied; set allow_request_session_key", c.id)
	case !templated(c.key) && rt.policy.hasPrefixes() && !rt.policy.prefixOK(strings.TrimSpace(c.key.Source())):
		return fmt.Errorf("mapping %s: session_key: %q does not start with one of allowed_session_key_prefixes", c.id, c.key.Source())
	}
	return nil
}

// attachVerifier builds c's signature verifier: every secret-bearing
// word must hold a secret (secret.Required: set, not empty), then the
// block's placeholders are expanded (verify.Config.Expand: the secrets,
// keys, URLs and files; a layout is not a placeholder string) and the
// provider's verifier built with the handler's Env.
func (rt *router) attachVerifier(c *compiledMapping, m *Mapping, repl *caddy.Replacer, env verify.Env) error {
	if m.Verify == nil {
		if m.RequireToken {
			return fmt.Errorf("mapping %s: require_token: only meaningful with verify (a mapping without verify always requires the token)", c.id)
		}
		return nil
	}
	for i, s := range m.Verify.Secrets {
		if _, err := secret.Required(fmt.Sprintf("mapping %s: verify secret %d", c.id, i+1), s); err != nil {
			return err
		}
	}
	for _, f := range verifySecretWords(m.Verify) {
		if _, err := secret.Required(fmt.Sprintf("mapping %s: verify %s", c.id, f.word), *f.value); err != nil {
			return err
		}
	}
	v, err := verify.NewWithEnv(m.Verify.Expand(func(s string) string { return repl.ReplaceKnown(s, "") }), env)
	if err != nil {
		return fmt.Errorf("mapping %s: %w", c.id, err)
	}
	c.verifier, c.needToken = v, m.RequireToken
	info := v.Info()
	c.handshake, c.hsMethods, c.form = info.Handshake != "", v.HandshakeMethods(), v.AcceptsForm()
	if c.needToken && len(c.hsMethods) > 0 {
		return fmt.Errorf("mapping %s: require_token: %s's %s handshake cannot carry the hook token (a token in the URL is refused); leave require_token out", c.id, info.Name, strings.Join(c.hsMethods, "/"))
	}
	if c.path == "" {
		rt.verifyAny = true
	} else {
		rt.verifyPaths[c.path] = true
	}
	rt.handshakes = rt.handshakes || c.handshake
	return nil
}

// secretWord is one single-valued secret of a verify block, by its word.
type secretWord struct {
	word  string
	value *string
}

// verifySecretWords lists the set single-valued secrets of a verify block
// (verify_token, client_state, encrypt_key: the words the registry marks
// secret besides secret itself).
func verifySecretWords(v *verify.Config) []secretWord {
	var out []secretWord
	for _, f := range []secretWord{{"verify_token", &v.VerifyToken}, {"client_state", &v.ClientState}, {"encrypt_key", &v.EncryptKey}} {
		if *f.value != "" {
			out = append(out, f)
		}
	}
	return out
}

// shadowedBy names an earlier mapping that answers every request c would
// (same or any path, no further condition, same credentials), or "".
func shadowedBy(earlier []*compiledMapping, c *compiledMapping) string {
	for _, e := range earlier {
		if e.expr == nil && e.source == "" && (e.path == "" || e.path == c.path) &&
			e.verifier == nil && c.verifier == nil {
			return e.id
		}
	}
	return ""
}

// bodyLimit is the read bound for a hook name: the largest that any
// mapping that could answer it allows (the matched mapping's own limit is
// checked after matching).
func (rt *router) bodyLimit(sub string) int64 {
	if sub == routeWake || sub == routeAgent {
		return rt.maxBody
	}
	if l, ok := rt.pathLimits[sub]; ok {
		return max(l, rt.anyPathLimit)
	}
	return rt.anyPathLimit
}

// largestBodyLimit is the largest body any hook name may have.
func (rt *router) largestBodyLimit() int64 {
	l := max(rt.maxBody, rt.anyPathLimit)
	for _, p := range rt.pathLimits {
		l = max(l, p)
	}
	return l
}

// signatureHeaders lists the headers of every verify block, once each.
func (rt *router) signatureHeaders() []string { return rt.sigHeaders }
