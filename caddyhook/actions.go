package caddyhook

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind says which gateway endpoint an action goes to.
type Kind uint8

// The two action kinds of the gateway protocol.
const (
	KindWake Kind = iota + 1
	KindAgent
)

// String returns the endpoint name of k ("wake" or "agent").
func (k Kind) String() string {
	switch k {
	case KindWake:
		return "wake"
	case KindAgent:
		return "agent"
	}
	return "unknown"
}

// parseKind maps "wake"/"agent" to a Kind; ok is false for anything else.
func parseKind(s string) (Kind, bool) {
	switch s {
	case "wake":
		return KindWake, true
	case "agent":
		return KindAgent, true
	}
	return 0, false
}

// Wake modes shared by wake.mode and agent.wakeMode.
const (
	modeNow           = "now"
	modeNextHeartbeat = "next-heartbeat"
)

// normalizeMode returns next-heartbeat for exactly that value and now
// otherwise, as the gateway does (no trimming, no case folding).
func normalizeMode(s string) string {
	if s == modeNextHeartbeat {
		return modeNextHeartbeat
	}
	return modeNow
}

// Session modes of an agent run.
const (
	sessionIsolated   = "isolated"
	sessionPersistent = "persistent"
)

// Field bits record which optional fields were set explicitly; only those
// are sent to the gateway, which applies the same defaults itself.
const (
	setName uint16 = 1 << iota
	setWakeMode
	setDeliver
	setChannel
	setTo
	setModel
	setThinking
	setTimeout
	setAgentID
	setSessionKey
	setMode
	setSessionMode
	setAccountID
	setWait
)

// keySource says who chose an action's session key.
type keySource uint8

const (
	keyNone     keySource = iota // not given: default or generated
	keyOperator                  // a static key in the config
	keyRequest                   // the request payload, a templated key or a transform
)

// Action is one resolved wake or agent action on its way to the gateway.
type Action struct {
	Kind Kind

	// Wake fields.
	Text string
	Mode string

	// Agent fields (AgentID and SessionKey also route a wake).
	Message        string
	Name           string
	AgentID        string
	SessionKey     string
	WakeMode       string
	SessionMode    string
	Deliver        bool
	Channel        string
	To             string
	AccountID      string
	Model          string
	Thinking       string
	TimeoutSeconds int64
	// Wait is waitForCompletion: the gateway answers when the run ends.
	Wait bool

	set       uint16
	keySource keySource
	// fromRequest marks an action decoded from a /wake or /agent request
	// body: the gateway refuses an unknown agentId there, where a
	// mapping's agent id falls back to the default agent.
	fromRequest bool

	// AllowUnsafe skips the external-content wrapper (mapping opt-in only).
	AllowUnsafe bool
	// Source names the content origin in the wrapper ("Webhook", "Email").
	Source string
}

// has reports whether the optional field bit was set explicitly.
func (a *Action) has(bit uint16) bool { return a.set&bit != 0 }

// fieldError is a 400 with a precise reason.
type fieldError string

func (e fieldError) Error() string { return string(e) }

// Error reasons of the reference gateway, kept verbatim.
const (
	errTextRequired        fieldError = "text required"
	errMessageRequired     fieldError = "message required"
	errModelRequired       fieldError = "model required"
	errAgentIDType         fieldError = "agentId must be a non-empty string"
	errSessionKeyType      fieldError = "sessionKey must be a non-empty string"
	errWakeKeyNeedsNow     fieldError = "sessionKey requires mode=now"
	errSessionMode         fieldError = "sessionMode must be isolated or persistent"
	errWaitType            fieldError = "waitForCompletion must be boolean"
	errToType              fieldError = "to must be a non-empty string for hook delivery"
	errAccountIDType       fieldError = "accountId must be a non-empty string for hook delivery"
	errAccountIDNeedsRoute fieldError = "accountId requires channel and to for hook delivery"
	errChannelWithTo       fieldError = "channel and to must be set together for hook delivery"
	errChannelConcrete     fieldError = "channel must name a concrete channel for hook delivery"
)

// fields gives typed access to a decoded JSON object.
type fields map[string]any

// str returns the trimmed string at key, and whether it was a string at all.
func (f fields) str(key string) (string, bool) {
	s, ok := f[key].(string)
	if !ok {
		return "", false
	}
	return jsTrim(s), true
}

// optional returns the trimmed string at key ("" when it is not a
// non-blank string) and whether the key is present at all (null counts:
// the gateway tests for undefined).
func (f fields) optional(key string) (string, bool) {
	raw, present := f[key]
	s, _ := raw.(string)
	return jsTrim(s), present
}

// decodeWake builds a wake action from a request or mapping object with
// the gateway's rules.
func decodeWake(f fields) (Action, error) {
	a := Action{Kind: KindWake, Mode: modeNow}
	a.Text, _ = f.str("text")
	if a.Text == "" {
		return a, errTextRequired
	}
	if m, ok := f["mode"].(string); ok {
		a.Mode = normalizeMode(m)
		a.set |= setMode
	}
	if id, present := f.optional("agentId"); present {
		if id == "" {
			return a, errAgentIDType
		}
		a.AgentID, a.set = id, a.set|setAgentID
	}
	if key, present := f.optional("sessionKey"); present {
		if key == "" {
			return a, errSessionKeyType
		}
		a.SessionKey, a.set, a.keySource = key, a.set|setSessionKey, keyRequest
	}
	if a.Mode == modeNextHeartbeat && a.SessionKey != "" {
		return a, errWakeKeyNeedsNow
	}
	return a, nil
}

// decodeAgent builds an agent action from a request or mapping object,
// applying the gateway's field rules in its order (a delivery channel
// must be one of p's channels). The routing policy is checked later by
// Apply.
func (p *Policy) decodeAgent(f fields) (Action, error) {
	a := Action{Kind: KindAgent, Name: "Hook", WakeMode: modeNow, Deliver: true}
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
func (p *Policy) applyAgentOptions(a *Action, f fields) error {
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
func (p *Policy) applyDelivery(a *Action, f fields) error {
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

// jsTrim trims what JavaScript's String.prototype.trim does: Unicode
// white space, line terminators and U+FEFF (a byte order mark).
func jsTrim(s string) string {
	if s == "" || s[0] > ' ' && s[0] < utf8.RuneSelf && s[len(s)-1] > ' ' && s[len(s)-1] < utf8.RuneSelf {
		return s // the common case: nothing to trim
	}
	return strings.TrimFunc(s, isJSSpace)
}

// isJSSpace reports the characters JavaScript's trim removes.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// appendGatewayBody appends the JSON body the gateway receives for a.
// Message must already be wrapped. Only explicitly set optional fields are
// written; agentId and sessionKey are the resolved ones (a wake carries
// them only when the request named them).
func (a *Action) appendGatewayBody(dst []byte) []byte {
	if a.Kind == KindWake {
		dst = append(dst, `{"text":`...)
		dst = appendJSONString(dst, a.Text)
		dst = append(dst, `,"mode":`...)
		dst = appendJSONString(dst, a.Mode)
		dst = appendOpt(dst, a.AgentID != "", "agentId", a.AgentID)
		dst = appendOpt(dst, a.SessionKey != "", "sessionKey", a.SessionKey)
		return append(dst, '}')
	}
	dst = append(dst, `{"message":`...)
	dst = appendJSONString(dst, a.Message)
	dst = appendOpt(dst, a.has(setName), "name", a.Name)
	dst = appendOpt(dst, a.AgentID != "", "agentId", a.AgentID)
	dst = appendOpt(dst, a.SessionKey != "", "sessionKey", a.SessionKey)
	dst = appendOpt(dst, a.has(setWakeMode), "wakeMode", a.WakeMode)
	dst = appendOpt(dst, a.has(setSessionMode), "sessionMode", a.SessionMode)
	if a.has(setDeliver) {
		dst = append(dst, `,"deliver":`...)
		dst = strconv.AppendBool(dst, a.Deliver)
	}
	dst = appendOpt(dst, a.has(setChannel), "channel", a.Channel)
	dst = appendOpt(dst, a.has(setTo), "to", a.To)
	dst = appendOpt(dst, a.has(setAccountID), "accountId", a.AccountID)
	dst = appendOpt(dst, a.has(setModel), "model", a.Model)
	dst = appendOpt(dst, a.has(setThinking), "thinking", a.Thinking)
	if a.has(setTimeout) {
		dst = append(dst, `,"timeoutSeconds":`...)
		dst = strconv.AppendInt(dst, a.TimeoutSeconds, 10)
	}
	if a.has(setWait) {
		dst = append(dst, `,"waitForCompletion":`...)
		dst = strconv.AppendBool(dst, a.Wait)
	}
	return append(dst, '}')
}

// appendOpt appends `,"name":"value"` when set.
func appendOpt(dst []byte, set bool, name, value string) []byte {
	if !set {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return appendJSONString(dst, value)
}
