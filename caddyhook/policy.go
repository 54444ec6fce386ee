package caddyhook

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// defaultChannels is the reference gateway's channel list.
var defaultChannels = []string{"last", "whatsapp", "telegram", "discord", "slack", "mattermost", "signal", "imessage", "msteams"}

// Policy reasons, verbatim from the reference gateway.
const (
	errAgentNotAllowed    fieldError = "agentId is not allowed by hooks.allowedAgentIds"
	errSessionKeyDisabled fieldError = "sessionKey is disabled for externally supplied hook payload values; set hooks.allowRequestSessionKey=true to enable"
	errModelNotAllowed    fieldError = "model is not allowed by hooks.allowedModels"
)

// Policy is the compiled routing policy: which agents, session keys,
// models and channels an action may use. It is immutable after
// newPolicy and shared by all requests.
type Policy struct {
	agents       []string            // known agent ids, first is the default
	allowedAgent map[string]struct{} // nil: any agent
	allowKey     bool
	prefixes     []string // lower-cased
	defaultKey   string
	models       map[string]struct{} // nil: any model
	channels     map[string]struct{}
	errChannel   fieldError
	errPrefix    fieldError
}

// policyConfig is the subset of the handler config the policy needs.
type policyConfig struct {
	Agents                    []string
	AllowedAgentIDs           []string
	AllowedAgentIDsSet        bool
	AllowRequestSessionKey    bool
	AllowedSessionKeyPrefixes []string
	DefaultSessionKey         string
	AllowedModels             []string
	Channels                  []string
}

// newPolicy compiles and checks a policy configuration. Errors name the
// offending field.
func newPolicy(c policyConfig) (*Policy, error) {
	p := &Policy{allowKey: c.AllowRequestSessionKey, defaultKey: strings.TrimSpace(c.DefaultSessionKey)}
	for _, a := range c.Agents {
		if a = normalizeAgentID(a); a == "" {
			return nil, fmt.Errorf("agents: empty agent id")
		}
		p.agents = append(p.agents, a)
	}
	if c.AllowedAgentIDsSet && !slices.Contains(c.AllowedAgentIDs, "*") {
		p.allowedAgent = make(map[string]struct{}, len(c.AllowedAgentIDs))
		for _, a := range c.AllowedAgentIDs {
			if a = normalizeAgentID(a); a != "" {
				p.allowedAgent[a] = struct{}{}
			}
		}
	}
	for _, pre := range c.AllowedSessionKeyPrefixes {
		if pre = strings.ToLower(strings.TrimSpace(pre)); pre == "" {
			return nil, fmt.Errorf("allowed_session_key_prefixes: empty prefix")
		}
		p.prefixes = append(p.prefixes, pre)
	}
	if len(p.prefixes) > 0 {
		p.errPrefix = fieldError("sessionKey must start with one of: " + strings.Join(p.prefixes, ", "))
		if p.defaultKey != "" && !p.prefixOK(p.defaultKey) {
			return nil, fmt.Errorf("default_session_key: %q does not start with one of allowed_session_key_prefixes (%s)", p.defaultKey, strings.Join(p.prefixes, ", "))
		}
		if p.defaultKey == "" && !p.prefixOK("hook:") {
			return nil, fmt.Errorf("allowed_session_key_prefixes: must include \"hook:\" when default_session_key is not set (generated keys are hook:<uuid>)")
		}
	}
	if len(c.AllowedModels) > 0 {
		p.models = make(map[string]struct{}, len(c.AllowedModels))
		for _, m := range c.AllowedModels {
			if m = strings.TrimSpace(m); m == "" {
				return nil, fmt.Errorf("allowed_models: empty model")
			}
			p.models[m] = struct{}{}
		}
	}
	channels := c.Channels
	if len(channels) == 0 {
		channels = defaultChannels
	}
	p.channels = make(map[string]struct{}, len(channels))
	names := make([]string, 0, len(channels))
	for _, ch := range channels {
		if ch = strings.ToLower(strings.TrimSpace(ch)); ch == "" {
			return nil, fmt.Errorf("channels: empty channel name")
		}
		p.channels[ch] = struct{}{}
		names = append(names, ch)
	}
	p.errChannel = fieldError("channel must be " + strings.Join(names, "|"))
	return p, nil
}

// normalizeAgentID trims and lower-cases an agent id as the gateway does.
func normalizeAgentID(id string) string {
	return strings.ToLower(strings.TrimSpace(id))
}

// prefixOK reports whether key starts with an allowed prefix, ignoring case.
func (p *Policy) prefixOK(key string) bool {
	for _, pre := range p.prefixes {
		if len(key) >= len(pre) && strings.EqualFold(key[:len(pre)], pre) {
			return true
		}
	}
	return false
}

// referenceDefaultAgent is the gateway's default agent id when no agent
// list is configured.
const referenceDefaultAgent = "main"

// defaultAgent returns the effective agent of a request without agentId.
func (p *Policy) defaultAgent() string {
	if len(p.agents) == 0 {
		return referenceDefaultAgent
	}
	return p.agents[0]
}

// Apply resolves a's agent and session key and checks every routing rule.
// It returns a precise reason on the first violation.
func (p *Policy) Apply(a *Action) error {
	if a.Kind != KindAgent {
		return nil
	}
	if err := p.resolveAgent(a); err != nil {
		return err
	}
	if a.has(setChannel) {
		if _, ok := p.channels[a.Channel]; !ok {
			return p.errChannel
		}
	}
	if a.has(setModel) && p.models != nil {
		if _, ok := p.models[a.Model]; !ok {
			return errModelNotAllowed
		}
	}
	return p.resolveSessionKey(a)
}

// resolveAgent applies the fallback for unknown ids and the allowlist,
// which is checked against the effective agent (an omitted id means the
// default agent, so an empty allowlist refuses every request). The body
// carries the effective id when it is known: always with an agent list,
// else only when the caller named one.
func (p *Policy) resolveAgent(a *Action) error {
	explicit := normalizeAgentID(a.AgentID)
	eff := explicit
	if eff != "" && len(p.agents) > 0 && !slices.Contains(p.agents, eff) {
		eff = p.agents[0]
	}
	if eff == "" {
		eff = p.defaultAgent()
	}
	if p.allowedAgent != nil {
		if _, ok := p.allowedAgent[eff]; !ok {
			return errAgentNotAllowed
		}
	}
	if explicit != "" || len(p.agents) > 0 {
		a.AgentID = eff
	} else {
		a.AgentID = ""
	}
	return nil
}

// resolveSessionKey checks an explicit key or picks the default one.
func (p *Policy) resolveSessionKey(a *Action) error {
	switch {
	case a.SessionKey == "":
		a.keySource = keyNone
		if a.SessionKey = p.defaultKey; a.SessionKey == "" {
			a.SessionKey = "hook:" + uuid.NewString()
		}
		return nil
	case a.keySource == keyRequest && !p.allowKey:
		return errSessionKeyDisabled
	case len(p.prefixes) > 0 && !p.prefixOK(a.SessionKey):
		return p.errPrefix
	}
	return nil
}
