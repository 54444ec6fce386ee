package caddyhook

import (
	"fmt"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/secret"
	"github.com/caddyhook/caddyhook/internal/tmpl"
)

// maxMappingBody is the largest body limit a mapping may ask for.
const maxMappingBody = 64 << 20

// provisionMappings compiles the configured mappings and then the presets
// (in that order: first match wins), their verifiers and transforms, and
// derives the body limit of each hook name.
func (h *Handler) provisionMappings(repl *caddy.Replacer) error {
	presets, err := presetMappings(h.Presets)
	if err != nil {
		return err
	}
	if h.forward {
		// the gateway runs its own presets: forward their hooks
		for i, p := range presets {
			presets[i] = Mapping{ID: p.ID, MatchPath: p.MatchPath, MaxBody: p.MaxBody, Forward: true}
		}
	}
	all := append(slices.Clone(h.Mappings), presets...)
	h.verifyPaths = map[string]bool{}
	h.pathLimits = map[string]int64{}
	h.anyPathLimit = h.MaxBody
	if len(all) == 0 {
		return nil
	}
	env, err := tmpl.NewEnv(h.CELCostLimit)
	if err != nil {
		return fmt.Errorf("mappings: %w", err)
	}
	transforms, err := h.transformSetup()
	if err != nil {
		return err
	}
	ids := make(map[string]bool, len(all))
	for i := range all {
		m := &all[i]
		c, err := h.compileMapping(m, i+1, env)
		if err != nil {
			return err
		}
		if ids[c.id] {
			return fmt.Errorf("mapping %s: id: used by an earlier mapping", c.id)
		}
		ids[c.id] = true
		if err := h.checkMappingKey(c); err != nil {
			return err
		}
		if err := h.attachVerifier(c, m, repl); err != nil {
			return err
		}
		if m.Transform != nil {
			if c.transform, err = transforms.compile(c.id, m.Transform); err != nil {
				return err
			}
		}
		c.bodyLimit = h.MaxBody
		if c.maxBody > 0 {
			c.bodyLimit = c.maxBody
		}
		if c.path == "" {
			h.anyPathLimit = max(h.anyPathLimit, c.bodyLimit)
		} else {
			h.pathLimits[c.path] = max(h.pathLimits[c.path], c.bodyLimit)
		}
		if by := shadowedBy(h.mappings, c); by != "" {
			h.logger.Warn("mapping can never match: an earlier mapping answers every request it would",
				zap.String("mapping", c.id), zap.String("shadowed_by", by))
		}
		h.mappings = append(h.mappings, c)
	}
	return nil
}

// checkMappingKey applies the provision-time session key rules: a
// templated key is request-supplied, so it needs allow_request_session_key
// and allowed_session_key_prefixes; a static key must fit the prefixes.
func (h *Handler) checkMappingKey(c *compiledMapping) error {
	switch {
	case c.key == nil:
		return nil
	case templated(c.key) && len(h.policy.prefixes) == 0:
		return fmt.Errorf("mapping %s: session_key: a templated session key needs allowed_session_key_prefixes", c.id)
	case templated(c.key) && !h.AllowRequestSessionKey:
		return fmt.Errorf("mapping %s: session_key: a templated session key counts as request-supplied; set allow_request_session_key", c.id)
	case !templated(c.key) && len(h.policy.prefixes) > 0 && !h.policy.prefixOK(strings.TrimSpace(c.key.Source())):
		return fmt.Errorf("mapping %s: session_key: %q does not start with one of allowed_session_key_prefixes", c.id, c.key.Source())
	}
	return nil
}

// attachVerifier builds c's signature verifier. Placeholders are expanded
// in the secrets only.
func (h *Handler) attachVerifier(c *compiledMapping, m *Mapping, repl *caddy.Replacer) error {
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
	v, err := newVerifier(*m.Verify, func(s string) string { return repl.ReplaceKnown(s, "") })
	if err != nil {
		return fmt.Errorf("mapping %s: %w", c.id, err)
	}
	c.verifier, c.needToken = v, m.RequireToken
	if c.path == "" {
		h.verifyAny = true
	} else {
		h.verifyPaths[c.path] = true
	}
	return nil
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
func (h *Handler) bodyLimit(sub string) int64 {
	if sub == routeWake || sub == routeAgent {
		return h.MaxBody
	}
	if l, ok := h.pathLimits[sub]; ok {
		return max(l, h.anyPathLimit)
	}
	return h.anyPathLimit
}
