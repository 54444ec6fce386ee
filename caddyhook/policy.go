package caddyhook

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// channelLast is the channel that means "where the conversation was last".
const channelLast = "last"

// defaultChannels is the reference gateway's channel list.
var defaultChannels = []string{channelLast, "whatsapp", "telegram", "discord", "slack", "mattermost", "signal", "imessage", "msteams"}

// Policy reasons: the gateway's texts, naming caddyhook's options where
// the gateway's name one of its own config keys.
const (
	errAgentNotAllowed      fieldError = "agentId is not allowed by allowed_agent_ids"
	errSessionKeyDisabled   fieldError = "sessionKey is disabled for externally supplied hook payload values; set allow_request_session_key to enable"
	errModelNotAllowed      fieldError = "model is not allowed by allowed_models"
	errPersistentNeedsKey   fieldError = "sessionKey is required when sessionMode is persistent"
	errPersistentNeedsPrefs fieldError = "allowed_session_key_prefixes is required when direct hook sessionMode is persistent"
)

// gatewayReasons are the gateway's own texts of the policy reasons that
// name a config key: in forward mode the edge refuses for the gateway
// (with the policy `caddy hooks import` copied from the gateway's
// config), so the sender reads what the gateway would have answered
// (D17 of issue 35); in render mode the edge's options are the keys.
var gatewayReasons = map[fieldError]fieldError{
	errAgentNotAllowed:      "agentId is not allowed by hooks.allowedAgentIds",
	errSessionKeyDisabled:   "sessionKey is disabled for externally supplied hook payload values; set hooks.allowRequestSessionKey=true to enable",
	errPersistentNeedsPrefs: "hooks.allowedSessionKeyPrefixes is required when direct hook sessionMode is persistent",
}

// policy is the compiled routing policy: which agents, session keys,
// models and channels an action may use. It is immutable after
// newPolicy and shared by all requests.
type policy struct {
	agents       []string            // known agent ids, first is the default
	allowedAgent map[string]struct{} // nil: any agent
	allowKey     bool
	prefixes     []string // lower-cased
	defaultKey   string
	models       *modelList // nil: any model
	channels     map[string]struct{}
	errChannel   fieldError
	errPrefix    fieldError
	// forward: the gateway resolves what the request leaves out, so the
	// policy never generates a session key.
	forward bool
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
	Forward                   bool
}

// newPolicy compiles and checks a policy configuration. Errors name the
// offending field.
func newPolicy(c policyConfig) (*policy, error) {
	p := &policy{allowKey: c.AllowRequestSessionKey, defaultKey: jsTrim(c.DefaultSessionKey), forward: c.Forward}
	if strings.ContainsAny(p.defaultKey, "{}") {
		// sent with every run: a {file.*} or {env.*} expanded here would
		// hand a file or a secret to the gateway and the model
		return nil, fmt.Errorf("default_session_key: %q must not hold a brace: the key is used as written, placeholders ({env.*}, {file.*}, …) are not expanded", p.defaultKey)
	}
	for _, a := range c.Agents {
		id, ok := strictAgentID(a)
		if !ok {
			return nil, fmt.Errorf("agents: %q is not a usable agent id", a)
		}
		p.agents = append(p.agents, id)
	}
	if c.AllowedAgentIDsSet {
		allowed := make(map[string]struct{}, len(c.AllowedAgentIDs))
		for _, a := range c.AllowedAgentIDs {
			allowed[allowedAgentEntry(a)] = struct{}{}
		}
		if _, anyAgent := allowed["*"]; !anyAgent {
			delete(allowed, "")
			p.allowedAgent = allowed
		}
	}
	for _, pre := range c.AllowedSessionKeyPrefixes {
		if pre = strings.ToLower(jsTrim(pre)); pre == "" {
			return nil, fmt.Errorf("allowed_session_key_prefixes: empty prefix")
		}
		if !slices.Contains(p.prefixes, pre) {
			p.prefixes = append(p.prefixes, pre)
		}
	}
	if len(p.prefixes) > 0 {
		p.errPrefix = fieldError("sessionKey must start with one of: " + strings.Join(p.prefixes, ", "))
		if p.defaultKey != "" && !p.prefixOK(p.defaultKey) {
			return nil, fmt.Errorf("default_session_key: %q does not start with one of allowed_session_key_prefixes (%s)", p.defaultKey, strings.Join(p.prefixes, ", "))
		}
		if p.defaultKey == "" && !p.forward && !p.prefixOK("hook:") {
			return nil, fmt.Errorf("allowed_session_key_prefixes: must include \"hook:\" when default_session_key is not set (generated keys are hook:<uuid>)")
		}
	}
	if len(c.AllowedModels) > 0 {
		m, err := newModelList(c.AllowedModels)
		if err != nil {
			return nil, err
		}
		p.models = m
	}
	channels := c.Channels
	if len(channels) == 0 {
		channels = defaultChannels
	}
	p.channels = make(map[string]struct{}, len(channels))
	names := make([]string, 0, len(channels))
	for _, ch := range channels {
		if ch = strings.ToLower(jsTrim(ch)); ch == "" {
			return nil, fmt.Errorf("channels: empty channel name")
		}
		p.channels[ch] = struct{}{}
		names = append(names, ch)
	}
	p.errChannel = fieldError("channel must be " + strings.Join(names, "|"))
	return p, nil
}

// Agent id rules of the gateway: a canonical id is 1–64 characters of
// [a-z0-9_-] starting with a letter or digit, compared lower-cased; other
// input has each run of other characters replaced by "-".
var (
	validAgentID   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)
	invalidAgentCh = regexp.MustCompile(`[^a-z0-9_-]+`)
)

// strictAgentID normalizes an explicitly supplied agent id as the gateway
// does; ok is false when nothing usable is left.
func strictAgentID(raw string) (string, bool) {
	trimmed := jsTrim(raw)
	lower := strings.ToLower(trimmed)
	if validAgentID.MatchString(trimmed) {
		return lower, true
	}
	id := strings.Trim(invalidAgentCh.ReplaceAllString(lower, "-"), "-")
	if len(id) > 64 {
		id = id[:64]
	}
	return id, id != ""
}

// allowedAgentEntry is an allowed_agent_ids entry as the policy reads
// it: "" when blank (ignored), "*" for any agent, else the normalised id.
func allowedAgentEntry(raw string) string {
	switch s := jsTrim(raw); s {
	case "", "*":
		return s
	}
	return normalizeAgentID(raw)
}

// normalizeAgentID is strictAgentID with the gateway's fallback to its
// default agent id, "main".
func normalizeAgentID(id string) string {
	if n, ok := strictAgentID(id); ok {
		return n
	}
	return referenceDefaultAgent
}

// hasPrefixes reports whether allowed_session_key_prefixes is set.
func (p *policy) hasPrefixes() bool { return len(p.prefixes) > 0 }

// prefixOK reports whether key starts with an allowed prefix, ignoring case.
func (p *policy) prefixOK(key string) bool {
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
func (p *policy) defaultAgent() string {
	if len(p.agents) == 0 {
		return referenceDefaultAgent
	}
	return p.agents[0]
}

// Apply resolves a's agent and session key and checks every routing rule
// in the gateway's order. It returns a precise reason on the first
// violation.
func (p *policy) Apply(a *action) error {
	err := p.apply(a)
	if fe, ok := err.(fieldError); ok && p.forward {
		if g, ok := gatewayReasons[fe]; ok {
			return g
		}
	}
	return err
}

// apply is Apply with the edge's own reasons.
func (p *policy) apply(a *action) error {
	if err := p.resolveAgent(a); err != nil {
		return err
	}
	if a.Kind == kindWake {
		if a.SessionKey == "" {
			return nil // a wake without a key goes to the main session
		}
		return p.checkSessionKey(a)
	}
	if a.SessionMode == sessionPersistent && a.SessionKey == "" && a.fromRequest {
		return errPersistentNeedsKey
	}
	if a.has(setModel) && p.models != nil && !p.models.allows(a.Model) {
		return errModelNotAllowed
	}
	if err := p.resolveSessionKey(a); err != nil {
		return err
	}
	if a.SessionMode == sessionPersistent && a.fromRequest && len(p.prefixes) == 0 {
		return errPersistentNeedsPrefs
	}
	return nil
}

// maxEchoedAgentID bounds how much of an unusable agent id a reason echoes.
const maxEchoedAgentID = 100

// resolveAgent applies the gateway's agent rules. A request's unknown or
// unusable id is refused (when the edge knows the agent list); a
// mapping's falls back to the default agent. The allowlist is checked
// against the effective agent (an omitted id means the default agent, so
// an empty allowlist refuses every request). The body carries the
// effective id when it is known: always with an agent list, else only
// when the caller named one.
func (p *policy) resolveAgent(a *action) error {
	explicit := ""
	if a.AgentID != "" {
		id, ok := strictAgentID(a.AgentID)
		switch {
		case a.fromRequest && !ok:
			raw := a.AgentID
			if len(raw) > maxEchoedAgentID {
				raw = raw[:maxEchoedAgentID] + "…"
			}
			return fieldError(`unknown agentId "` + raw + `"`)
		case a.fromRequest && len(p.agents) > 0 && !slices.Contains(p.agents, id):
			return fieldError(`unknown agentId "` + id + `"`)
		case !ok:
			id = referenceDefaultAgent
		}
		if len(p.agents) > 0 && !slices.Contains(p.agents, id) {
			id = p.agents[0]
		}
		explicit = id
	}
	eff := explicit
	if eff == "" {
		eff = p.defaultAgent()
	}
	if p.allowedAgent != nil {
		if _, ok := p.allowedAgent[eff]; !ok {
			return errAgentNotAllowed
		}
	}
	switch {
	case explicit != "":
		a.AgentID = explicit
	case len(p.agents) > 0 && a.Kind == kindAgent:
		a.AgentID = eff
	default:
		a.AgentID = ""
	}
	return nil
}

// resolveSessionKey checks an explicit key or picks the default one; in
// render mode it generates hook:<uuid> when there is neither. keySource
// stays keyNone for an assigned default or generated key.
func (p *policy) resolveSessionKey(a *action) error {
	if a.SessionKey != "" {
		return p.checkSessionKey(a)
	}
	a.keySource = keyNone
	if a.SessionKey = p.defaultKey; a.SessionKey == "" && !p.forward {
		a.SessionKey = "hook:" + uuid.NewString()
	}
	return nil
}

// checkSessionKey applies the request-key switch and the prefixes to an
// explicit session key.
func (p *policy) checkSessionKey(a *action) error {
	switch {
	case a.keySource == keyRequest && !p.allowKey:
		return errSessionKeyDisabled
	case len(p.prefixes) > 0 && !p.prefixOK(a.SessionKey):
		return p.errPrefix
	}
	return nil
}

// decodeAgent builds an agent action from a request or mapping object,
// applying the gateway's field rules in its order (a delivery channel
// must be one of p's channels). The routing policy is checked later by
// Apply.
func (p *policy) decodeAgent(f fields) (action, error) {
	a := action{Kind: kindAgent, Name: "Hook", WakeMode: modeNow, Deliver: true}
	if raw, present := f["waitForCompletion"]; present {
		b, ok := raw.(bool)
		if !ok {
			return a, errWaitType
		}
		a.Wait, a.set = b, a.set|setWait
	}
	a.Message, _ = f.str("message")
	if a.Message == "" {
		return a, errMessageRequired
	}
	if err := p.applyAgentOptions(&a, f); err != nil {
		return a, err
	}
	if m, present := f.optional("model"); present {
		if m == "" {
			return a, errModelRequired
		}
		a.Model, a.set = m, a.set|setModel
	}
	if s, _ := f.str("thinking"); s != "" {
		a.Thinking, a.set = s, a.set|setThinking
	}
	if n, ok := f["timeoutSeconds"].(float64); ok && n > 0 && !math.IsInf(n, 0) {
		a.TimeoutSeconds, a.set = int64(math.Min(math.Floor(n), math.MaxInt32)), a.set|setTimeout
	}
	return a, nil
}

// applyAgentOptions sets the optional routing and delivery fields present
// in f, refusing malformed ones as the gateway does.
func (p *policy) applyAgentOptions(a *action, f fields) error {
	if s, _ := f.str("name"); s != "" {
		a.Name, a.set = s, a.set|setName
	}
	if id, present := f.optional("agentId"); present {
		if id == "" {
			return errAgentIDType
		}
		a.AgentID, a.set = id, a.set|setAgentID
	}
	if s, ok := f["wakeMode"].(string); ok {
		a.WakeMode, a.set = normalizeMode(s), a.set|setWakeMode
	}
	if s, _ := f.str("sessionKey"); s != "" {
		a.SessionKey, a.set, a.keySource = s, a.set|setSessionKey, keyRequest
	}
	if raw, present := f["sessionMode"]; present {
		s, _ := raw.(string)
		if s != sessionIsolated && s != sessionPersistent {
			return errSessionMode
		}
		a.SessionMode, a.set = s, a.set|setSessionMode
	}
	return p.applyDelivery(a, f)
}

// applyDelivery applies the gateway's delivery rules: any deliver value
// but false delivers; only then are channel (omitted = last, else one of
// p's channels), to and accountId read and checked.
func (p *policy) applyDelivery(a *action, f fields) error {
	if b, ok := f["deliver"].(bool); ok {
		a.Deliver, a.set = b, a.set|setDeliver
	}
	if !a.Deliver {
		return nil
	}
	rawChannel, hasChannel := f["channel"]
	to, hasTo := f.optional("to")
	account, hasAccount := f.optional("accountId")
	if hasChannel {
		// present but not a usable name (null, a number, "") is refused
		// with the channel list, as the gateway does
		s, _ := rawChannel.(string)
		a.Channel, a.set = strings.ToLower(jsTrim(s)), a.set|setChannel
		if _, ok := p.channels[a.Channel]; !ok {
			return p.errChannel
		}
	}
	switch {
	case !hasChannel && !hasTo && !hasAccount:
		return nil
	case hasTo && to == "":
		return errToType
	case hasAccount && account == "":
		return errAccountIDType
	case hasAccount && (!hasChannel || to == ""):
		return errAccountIDNeedsRoute
	case !hasChannel || to == "":
		return errChannelWithTo
	case a.Channel == channelLast:
		return errChannelConcrete
	}
	a.To, a.set = to, a.set|setTo
	if hasAccount {
		a.AccountID, a.set = account, a.set|setAccountID
	}
	return nil
}

// Recheck applies today's policy to an action as it was dispatched
// before (a replay of a kept gateway request): its fields as sent, who
// chose its session key and whether it came from a /wake or /agent
// request as recorded. It refuses what Apply refuses today, and an
// explicit agent that today's policy would resolve to another one (an id
// no longer in agents): a replay sends what was sent, never a body the
// policy rewrote.
func (p *policy) Recheck(a action) error {
	sent := a.AgentID
	if err := p.Apply(&a); err != nil {
		return err
	}
	if sent != "" && a.AgentID != normalizeAgentID(sent) {
		return fieldError(`agentId "` + sent + `" would now be "` + a.AgentID + `"`)
	}
	return nil
}

// generatedKey matches the session keys the edge generates (hook:<uuid>).
var generatedKey = regexp.MustCompile(`^hook:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// assigns reports whether key is one the policy assigns itself: the
// default session key or, without one in render mode, a generated key.
func (p *policy) assigns(key string) bool {
	if p.defaultKey != "" {
		return key == p.defaultKey
	}
	return !p.forward && generatedKey.MatchString(key)
}
