package caddyhook

import (
	"errors"
	"maps"
	"net/http"
	"slices"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/tmpl"
)

// planMapped resolves a custom hook name through the mappings (configured
// ones first, then presets; the first eligible match wins).
func (h *Handler) planMapped(ex *exchange) (plan, *hookError) {
	ex.route = "mapped"
	vars := h.requestVars(ex)
	authReason := ""
	for _, c := range h.mappings {
		if !c.answers(ex.sub) {
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
// for_each list (at most maxFanout, the rest dropped and counted).
func (h *Handler) planFor(c *compiledMapping, ex *exchange, vars *tmpl.Vars) (plan, *hookError) {
	if c.forEach == "" {
		a, skip, herr := h.buildAction(c, ex, vars)
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
	acts := make([]Action, 0, len(items))
	for _, it := range items {
		p := maps.Clone(ex.payload)
		p[c.forEach] = []any{it}
		v := *vars
		v.Payload = p
		a, skip, herr := h.buildAction(c, ex, &v)
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

// buildAction renders c's templates, applies its transform and decodes
// the result. skip is true when the transform returned null.
func (h *Handler) buildAction(c *compiledMapping, ex *exchange, vars *tmpl.Vars) (Action, bool, *hookError) {
	f, herr := c.render(vars)
	if herr != nil {
		return Action{}, false, herr
	}
	kind, unsafe, keyFromRequest := c.kind, c.unsafe, templated(c.key)
	if c.transform != nil {
		override, err := c.transform.run(ex, vars)
		if err == nil && override != nil {
			err = mergeOverride(f, override, &kind, &unsafe, &keyFromRequest)
		}
		if err != nil {
			h.logger.Error("hook transform failed", zap.String("mapping", c.id), zap.String("error", err.Error()))
			return Action{}, false, reject(http.StatusInternalServerError, "hook transform failed: "+c.id)
		}
		if override == nil {
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

// errTransformKind is a transform result whose kind is neither wake nor agent.
var errTransformKind = errors.New(`result: kind must be "wake" or "agent"`)

// mergeOverride lays a transform's result over the rendered fields: its
// fields win (null ones are ignored); kind and allowUnsafeExternalContent
// switch the action; a session key it sets counts as request-supplied.
func mergeOverride(f fields, override map[string]any, kind *Kind, unsafe, keyFromRequest *bool) error {
	if raw, ok := override["kind"]; ok && raw != nil {
		k, ok := parseKind(stringField(override, "kind"))
		if !ok {
			return errTransformKind
		}
		*kind = k
	}
	if b, ok := override["allowUnsafeExternalContent"].(bool); ok {
		*unsafe = b
	}
	if _, ok := override["sessionKey"]; ok {
		*keyFromRequest = true
	}
	for k, v := range override {
		if k != "kind" && k != "allowUnsafeExternalContent" && v != nil {
			f[k] = v
		}
	}
	return nil
}

// stringField returns f[key] when it is a string.
func stringField(f map[string]any, key string) string {
	s, _ := f[key].(string)
	return s
}
