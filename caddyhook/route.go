package caddyhook

import (
	"errors"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/boundary"
	"github.com/caddyhook/caddyhook/internal/tmpl"
)

// maxFanout caps the actions one request may produce.
const maxFanout = 200

// plan is what a request resolved to: the actions to dispatch, how many a
// fan-out cap dropped, or a skip (204). A request to forward as sent has
// forwarded set (its actions, if any, are the decoded /wake or /agent
// request, checked by the policy but not dispatched) and, once the
// forwarder built it, fwd (fwd.name is not empty).
type plan struct {
	actions   []action
	dropped   int
	skip      bool
	forwarded bool
	// lane is a forward mapping's action: the spool lane of its request
	lane actionKind
	fwd  forwardReq
}

// waits reports whether p asks the gateway to answer when the run ends.
func (p *plan) waits() bool {
	if p.fwd.name != "" {
		return p.fwd.wait
	}
	for i := range p.actions {
		if p.actions[i].Wait {
			return true
		}
	}
	return false
}

// plan resolves the request's sub-path to the actions it asks for:
// wake and agent are built in (decoded with the gateway's request rules;
// in forward mode then forwarded as sent); any other name goes through
// the mappings.
func (rt *router) plan(ex *exchange) (plan, *hookError) {
	var (
		a   action
		err error
	)
	switch ex.sub {
	case routeWake:
		ex.route = routeWake
		a, err = decodeWake(ex.payload)
	case routeAgent:
		ex.route = routeAgent
		a, err = rt.policy.decodeAgent(ex.payload)
		a.Source = boundary.SourceWebhook
	default:
		return rt.planMapped(ex)
	}
	if !ex.tokenOK {
		return plan{}, unauthorized(reasonBadToken)
	}
	if err != nil {
		return plan{}, reject(http.StatusBadRequest, err.Error())
	}
	a.fromRequest = true
	return plan{actions: []action{a}, forwarded: rt.forward}, nil
}

// planMapped resolves a custom hook name through the mappings (configured
// ones first, then presets; the first eligible match wins).
func (rt *router) planMapped(ex *exchange) (plan, *hookError) {
	ex.route = "mapped"
	vars := rt.requestVars(ex)
	authReason := ""
	trace := ex.trace || rt.debug
	for _, c := range rt.mappings {
		if !rt.answers(c, ex) {
			continue
		}
		if !c.eligible(ex) {
			why := reasonBadToken
			if c.verifier != nil && !slices.Contains(ex.verified, c.verifier) {
				why = ex.signatureReason()
			}
			if authReason == "" {
				authReason = why
			}
			if trace {
				ex.passed = append(ex.passed, c.id+": not authenticated ("+why+")")
			}
			continue
		}
		vars.Event = ex.eventOf(c.verifier) // {{event}}: this mapping's provider's
		ok, why, err := c.matches(vars)
		if err != nil {
			ex.route, ex.mapping = c.id, c.id
			return plan{}, c.failed()
		}
		if !ok {
			if trace {
				ex.passed = append(ex.passed, c.id+": "+why)
			}
			continue
		}
		ex.route, ex.mapping, ex.event = c.id, c.id, vars.Event
		if int64(len(ex.body)) > c.bodyLimit {
			return plan{}, reject(http.StatusRequestEntityTooLarge, reasonTooLarge)
		}
		return rt.planFor(c, ex, vars)
	}
	if authReason != "" {
		return plan{}, unauthorized(authReason)
	}
	return plan{}, reject(http.StatusNotFound, "no mapping for hook")
}

// planFor builds the actions of mapping c: one, or one per element of its
// for_each list (at most maxFanout, the rest dropped and counted); or,
// for a forward mapping, the request to forward. Each for_each element
// sees the payload with the list replaced by a one-element list, as the
// reference gateway's forEach does, without copying the payload:
// templates and CEL read through tmpl.Vars.Element, and the transform
// runs once per element over a payload converted once (RunEach), so the
// work follows the list, not the size of the rest of the payload.
func (rt *router) planFor(c *compiledMapping, ex *exchange, vars *tmpl.Vars) (plan, *hookError) {
	if c.forward {
		return plan{forwarded: true, lane: c.kind}, nil
	}
	if c.forEach == "" {
		a, skip, herr := rt.buildAction(c, ex, vars, func() (map[string]any, error) { return c.transform.run(ex, vars) })
		if herr != nil || skip {
			if skip {
				ex.skip = "mapping " + c.id + ": transform returned null"
			}
			return plan{skip: skip}, herr
		}
		return plan{actions: []action{a}}, nil
	}
	items, _ := ex.payload[c.forEach].([]any)
	if len(items) == 0 {
		ex.skip = "mapping " + c.id + ": for_each " + c.forEach + " has no elements (missing, empty or not a list)"
		return plan{skip: true}, nil
	}
	dropped := 0
	if len(items) > maxFanout {
		dropped = len(items) - maxFanout
		items = items[:maxFanout]
	}
	var overrides []map[string]any
	var failed error
	if c.transform != nil && len(items) > 0 {
		overrides, failed = c.transform.runEach(ex, vars, c.forEach, items)
	}
	acts := make([]action, 0, len(items))
	for i, it := range items {
		v := *vars
		v.Element = tmpl.Element{Key: c.forEach, Value: []any{it}}
		a, skip, herr := rt.buildAction(c, ex, &v, func() (map[string]any, error) {
			if i < len(overrides) {
				return overrides[i], nil
			}
			return nil, failed
		})
		if herr != nil {
			return plan{}, herr
		}
		if !skip {
			acts = append(acts, a)
		}
	}
	if len(acts) == 0 {
		ex.skip = "mapping " + c.id + ": transform returned null for each of the " + strconv.Itoa(len(items)) + " elements of " + c.forEach
		return plan{skip: true}, nil
	}
	if dropped > 0 {
		rt.logger.Warn("fan-out capped", zap.String("mapping", c.id), zap.Int("dispatched", len(acts)), zap.Int("dropped", dropped))
	}
	return plan{actions: acts, dropped: dropped}, nil
}

// buildAction renders c's templates, applies its transform's result
// (override, called only when c has a transform) and decodes the result.
// skip is true when the transform returned null.
func (rt *router) buildAction(c *compiledMapping, ex *exchange, vars *tmpl.Vars, override func() (map[string]any, error)) (action, bool, *hookError) {
	f, herr := c.render(vars)
	if herr != nil {
		return action{}, false, herr
	}
	kind, unsafe, keyFromRequest := c.kind, c.unsafe, templated(c.key)
	if c.transform != nil {
		result, err := override()
		if err == nil && result != nil {
			f, err = mergeOverride(f, result, &kind, &unsafe, &keyFromRequest)
		}
		if err != nil {
			rt.logger.Error("hook transform failed", zap.String("mapping", c.id), zap.String("error", err.Error()))
			return action{}, false, reject(http.StatusInternalServerError, "hook transform failed: "+c.id)
		}
		if result == nil {
			return action{}, true, nil
		}
	}
	source := boundary.SourceWebhook
	if ex.sub == "gmail" {
		source = boundary.SourceEmail
	}
	a, herr := c.action(kind, f, keyFromRequest, unsafe, source)
	return a, false, herr
}

// errTransformKey is a transform result whose sessionKey is neither a
// string nor null while the mapping's own key is templated; the reference
// gateway fails the request on it (a TypeError in its validation).
var errTransformKey = errors.New("result: sessionKey must be a string")

// Fields a transform may override, by the action kind the merge builds.
var (
	wakeOverrides  = []string{"agentId", "sessionKey"}
	agentOverrides = []string{"name", "agentId", "sessionKey", "sessionMode", "channel", "to", "model", "thinking", "timeoutSeconds"}
)

// mergeOverride lays a transform's result over the rendered fields f with
// the reference gateway's rules (its mergeAction):
//   - kind "wake" makes a wake action, any other non-null kind an agent
//     action, null or absent keeps the mapping's; fields rendered for the
//     other kind are dropped when the kind switches;
//   - text and message override only as strings; mode and wakeMode only
//     as "next-heartbeat"; deliver and allowUnsafeExternalContent only as
//     booleans; anything else of another type keeps the rendered value;
//   - every other field overrides when it is not null, whatever its type;
//     decoding then ignores a value of the wrong type, so the gateway's
//     default applies (an agentId, to or model that is not a non-blank
//     string is dropped here for the same reason: the gateway's mapped
//     dispatch falls back to its default where the /agent rules would
//     refuse);
//   - a string sessionKey counts as request-supplied unless the result
//     says sessionKeySource "static" (operator code vouching for it); a
//     blank one means no key.
//
// It returns the merged fields.
func mergeOverride(f fields, override map[string]any, kind *actionKind, unsafe, keyFromRequest *bool) (fields, error) {
	target := *kind
	if k := override["kind"]; k != nil {
		target = kindAgent
		if k == "wake" {
			target = kindWake
		}
	}
	sameKind := target == *kind
	out := make(fields, len(f)+2)
	keep := func(key string) { // the rendered value, for the same kind only
		if v, ok := f[key]; ok && sameKind {
			out[key] = v
		}
	}
	stringOrBase := func(key string) {
		if s, ok := override[key].(string); ok {
			out[key] = s
			return
		}
		keep(key)
	}
	heartbeatOrBase := func(key string) {
		if override[key] == modeNextHeartbeat {
			out[key] = modeNextHeartbeat
			return
		}
		keep(key)
	}
	overrides := agentOverrides
	if target == kindWake {
		overrides = wakeOverrides
		stringOrBase("text")
		heartbeatOrBase("mode")
	} else {
		stringOrBase("message")
		heartbeatOrBase("wakeMode")
		if b, ok := override["deliver"].(bool); ok {
			out["deliver"] = b
		} else {
			keep("deliver")
		}
	}
	for _, key := range overrides {
		if v := override[key]; v != nil {
			out[key] = v
		} else {
			keep(key)
		}
	}
	// The gateway's mapped dispatch reads these as optional strings, so
	// anything but a non-blank string means its default (the configured
	// default agent, no explicit target, the default model) rather than
	// the refusal the /agent request rules would give.
	for _, key := range []string{"agentId", "to", "model"} {
		if v, present := out[key]; present {
			if s, ok := v.(string); !ok || strings.TrimSpace(s) == "" {
				delete(out, key)
			}
		}
	}
	if b, ok := override["allowUnsafeExternalContent"].(bool); ok {
		*unsafe = b
	} else if !sameKind {
		*unsafe = false
	}
	switch key := override["sessionKey"].(type) {
	case string:
		*keyFromRequest = override["sessionKeySource"] != "static"
		if strings.TrimSpace(key) == "" {
			delete(out, "sessionKey")
		}
	case nil:
		if !sameKind {
			*keyFromRequest = false
		}
	default:
		if *keyFromRequest && sameKind {
			return nil, errTransformKey
		}
		delete(out, "sessionKey")
		*keyFromRequest = false
	}
	*kind = target
	return out, nil
}

// answers reports whether c's match_path admits ex's hook name. A
// mapping without match_path admits every name. A forward mapping
// compares its path, percent-encoded, with the name the gateway reads
// (its sub-path as the gateway reads it, with the slashes around it
// trimmed: escapes kept as sent), as the gateway compares its
// match.path, so that the edge picks the mapping the gateway picks; it
// admits only names the edge can forward as sent.
func (rt *router) answers(c *compiledMapping, ex *exchange) bool {
	if !c.forward {
		return c.path == "" || c.path == ex.sub
	}
	rest, ok := ex.gatewayRest(rt.base)
	return ok && (c.path == "" || c.gwPath == strings.Trim(rest, "/"))
}

// eligible reports whether mapping c may answer ex: a mapping without
// verify needs the hook token; one with verify needs its signature, and
// the token as well when it sets require_token.
func (c *compiledMapping) eligible(ex *exchange) bool {
	if c.verifier == nil {
		return ex.tokenOK
	}
	return slices.Contains(ex.verified, c.verifier) && (!c.needToken || ex.tokenOK)
}

// matches reports whether c's source and CEL conditions hold (CEL last),
// and when not, which one failed; the caller has checked answers.
func (c *compiledMapping) matches(vars *tmpl.Vars) (bool, string, error) {
	if c.source != "" {
		if s, _ := vars.Payload["source"].(string); s != c.source {
			return false, "match_source false", nil
		}
	}
	if c.expr != nil {
		ok, err := c.expr.Match(vars)
		return ok, "match_expr false", err
	}
	return true, "", nil
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
func (c *compiledMapping) action(kind actionKind, f fields, keyFromRequest bool, unsafe bool, source string) (action, *hookError) {
	var (
		a   action
		err error
	)
	if kind == kindWake {
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

// requestVars gathers what templates, CEL and transforms see for a
// request. Headers and query are gathered only when a mapping that could
// answer the hook name reads them. The hook token's headers are left out:
// no template or script can copy the token into a message.
func (rt *router) requestVars(ex *exchange) *tmpl.Vars {
	var needHeaders, needQuery bool
	for _, c := range rt.mappings {
		if rt.answers(c, ex) {
			needHeaders = needHeaders || c.readsHeaders
			needQuery = needQuery || c.readsQuery
		}
	}
	v := &tmpl.Vars{Payload: ex.payload, Path: ex.sub, Now: ex.now}
	if needHeaders {
		v.Headers = rt.templateHeaders(ex.r.Header)
	}
	if needQuery && ex.r.URL.RawQuery != "" {
		v.Query = templateQuery(ex.r.URL.Query())
	}
	return v
}

// templateHeaders maps lower-cased header names to their values (joined
// with ", " when repeated), without the hook token's headers
// (Authorization, x-service-token and the token_headers aliases).
func (rt *router) templateHeaders(hdr http.Header) map[string]string {
	headers := make(map[string]string, len(hdr))
	for k, v := range hdr {
		if c := textproto.CanonicalMIMEHeaderKey(k); c == "Authorization" || rt.tokens.isHeader(c) {
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
