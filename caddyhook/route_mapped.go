package caddyhook

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/tmpl"
)

// planMapped resolves a custom hook name through the mappings (configured
// ones first, then presets; the first eligible match wins).
func (h *Handler) planMapped(ex *exchange) (plan, *hookError) {
	ex.route = "mapped"
	vars := h.requestVars(ex)
	authReason := ""
	for _, c := range h.mappings {
		if !h.answers(c, ex) {
			continue
		}
		if !ex.eligible(c) {
			if authReason == "" {
				authReason = "invalid or missing token"
				if c.verifier != nil && !slices.Contains(ex.verified, c.verifier) {
					authReason = ex.signatureReason()
				}
			}
			continue
		}
		ok, err := c.matches(vars)
		if err != nil {
			ex.route, ex.mapping = c.id, c.id
			return plan{}, c.failed()
		}
		if !ok {
			continue
		}
		ex.route, ex.mapping = c.id, c.id
		if int64(len(ex.body)) > c.bodyLimit {
			return plan{}, reject(http.StatusRequestEntityTooLarge, reasonTooLarge)
		}
		return h.planFor(c, ex, vars)
	}
	if authReason != "" {
		return plan{}, h.authFailed(ex, authReason)
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
func (h *Handler) planFor(c *compiledMapping, ex *exchange, vars *tmpl.Vars) (plan, *hookError) {
	if c.forward {
		f, herr := h.newForward(ex, KindAgent)
		return plan{fwd: f}, herr
	}
	if c.forEach == "" {
		a, skip, herr := h.buildAction(c, ex, vars, func() (map[string]any, error) { return c.transform.run(ex, vars) })
		if herr != nil || skip {
			return plan{skip: skip}, herr
		}
		return plan{actions: []Action{a}}, nil
	}
	items, _ := ex.payload[c.forEach].([]any)
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
	acts := make([]Action, 0, len(items))
	for i, it := range items {
		v := *vars
		v.Element = tmpl.Element{Key: c.forEach, Value: []any{it}}
		a, skip, herr := h.buildAction(c, ex, &v, func() (map[string]any, error) {
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
		return plan{skip: true}, nil
	}
	if dropped > 0 {
		h.logger.Warn("fan-out capped", zap.String("mapping", c.id), zap.Int("dispatched", len(acts)), zap.Int("dropped", dropped))
	}
	return plan{actions: acts, dropped: dropped}, nil
}

// buildAction renders c's templates, applies its transform's result
// (override, called only when c has a transform) and decodes the result.
// skip is true when the transform returned null.
func (h *Handler) buildAction(c *compiledMapping, ex *exchange, vars *tmpl.Vars, override func() (map[string]any, error)) (Action, bool, *hookError) {
	f, herr := c.render(vars)
	if herr != nil {
		return Action{}, false, herr
	}
	kind, unsafe, keyFromRequest := c.kind, c.unsafe, templated(c.key)
	if c.transform != nil {
		result, err := override()
		if err == nil && result != nil {
			f, err = mergeOverride(f, result, &kind, &unsafe, &keyFromRequest)
		}
		if err != nil {
			h.logger.Error("hook transform failed", zap.String("mapping", c.id), zap.String("error", err.Error()))
			return Action{}, false, reject(http.StatusInternalServerError, "hook transform failed: "+c.id)
		}
		if result == nil {
			return Action{}, true, nil
		}
	}
	source := sourceWebhook
	if ex.sub == "gmail" {
		source = sourceEmail
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
func mergeOverride(f fields, override map[string]any, kind *Kind, unsafe, keyFromRequest *bool) (fields, error) {
	target := *kind
	if k := override["kind"]; k != nil {
		target = KindAgent
		if k == "wake" {
			target = KindWake
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
	if target == KindWake {
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
