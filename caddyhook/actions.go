package caddyhook

import (
	"math"
	"strconv"
	"strings"
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

// normalizeMode returns next-heartbeat for exactly that value and now otherwise.
func normalizeMode(s string) string {
	if strings.TrimSpace(s) == modeNextHeartbeat {
		return modeNextHeartbeat
	}
	return modeNow
}

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

	// Agent fields.
	Message        string
	Name           string
	AgentID        string
	SessionKey     string
	WakeMode       string
	Deliver        bool
	Channel        string
	To             string
	Model          string
	Thinking       string
	TimeoutSeconds int64

	set       uint16
	keySource keySource

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
	errTextRequired    fieldError = "text required"
	errMessageRequired fieldError = "message required"
	errModelRequired   fieldError = "model required"
)

// fields gives typed access to a decoded JSON object.
type fields map[string]any

// str returns the trimmed string at key, and whether it was a string at all.
func (f fields) str(key string) (string, bool) {
	s, ok := f[key].(string)
	if !ok {
		return "", false
	}
	return strings.TrimSpace(s), true
}

// decodeWake builds a wake action from a request or mapping object.
func decodeWake(f fields) (Action, error) {
	a := Action{Kind: KindWake, Mode: modeNow}
	a.Text, _ = f.str("text")
	if a.Text == "" {
		return a, errTextRequired
	}
	if m, ok := f.str("mode"); ok {
		a.Mode = normalizeMode(m)
		a.set |= setMode
	}
	return a, nil
}

// decodeAgent builds an agent action from a request or mapping object,
// applying the reference field rules. Channel membership and the other
// policy rules are checked later by Policy.
func decodeAgent(f fields) (Action, error) {
	a := Action{Kind: KindAgent, Name: "Hook", WakeMode: modeNow, Deliver: true}
	a.Message, _ = f.str("message")
	if a.Message == "" {
		return a, errMessageRequired
	}
	applyAgentOptions(&a, f)
	if raw, present := f["model"]; present {
		m, _ := raw.(string)
		if m = strings.TrimSpace(m); m == "" {
			return a, errModelRequired
		}
		a.Model, a.set = m, a.set|setModel
	}
	return a, nil
}

// applyAgentOptions sets the optional agent fields present in f.
func applyAgentOptions(a *Action, f fields) {
	if s, _ := f.str("name"); s != "" {
		a.Name, a.set = s, a.set|setName
	}
	if s, _ := f.str("agentId"); s != "" {
		a.AgentID, a.set = s, a.set|setAgentID
	}
	if s, _ := f.str("sessionKey"); s != "" {
		a.SessionKey, a.set, a.keySource = s, a.set|setSessionKey, keyRequest
	}
	if s, ok := f.str("wakeMode"); ok {
		a.WakeMode, a.set = normalizeMode(s), a.set|setWakeMode
	}
	if b, ok := f["deliver"].(bool); ok {
		a.Deliver, a.set = b, a.set|setDeliver
	}
	if raw, present := f["channel"]; present {
		// present but not a usable name (null, a number, "") is kept as ""
		// so that Policy refuses it with the channel list, as the gateway does
		s, _ := raw.(string)
		a.Channel, a.set = strings.ToLower(strings.TrimSpace(s)), a.set|setChannel
	}
	if s, _ := f.str("to"); s != "" {
		a.To, a.set = s, a.set|setTo
	}
	if s, _ := f.str("thinking"); s != "" {
		a.Thinking, a.set = s, a.set|setThinking
	}
	if n, ok := f["timeoutSeconds"].(float64); ok && n > 0 && !math.IsInf(n, 0) {
		a.TimeoutSeconds, a.set = int64(math.Min(math.Floor(n), math.MaxInt32)), a.set|setTimeout
	}
}

// appendGatewayBody appends the JSON body the gateway receives for a.
// Message must already be wrapped. Only explicitly set optional fields are
// written; agentId and sessionKey are always the resolved ones.
func (a *Action) appendGatewayBody(dst []byte) []byte {
	if a.Kind == KindWake {
		dst = append(dst, `{"text":`...)
		dst = appendJSONString(dst, a.Text)
		dst = append(dst, `,"mode":`...)
		dst = appendJSONString(dst, a.Mode)
		return append(dst, '}')
	}
	dst = append(dst, `{"message":`...)
	dst = appendJSONString(dst, a.Message)
	dst = appendOpt(dst, a.has(setName), "name", a.Name)
	dst = appendOpt(dst, a.AgentID != "", "agentId", a.AgentID)
	dst = appendOpt(dst, a.SessionKey != "", "sessionKey", a.SessionKey)
	dst = appendOpt(dst, a.has(setWakeMode), "wakeMode", a.WakeMode)
	if a.has(setDeliver) {
		dst = append(dst, `,"deliver":`...)
		dst = strconv.AppendBool(dst, a.Deliver)
	}
	dst = appendOpt(dst, a.has(setChannel), "channel", a.Channel)
	dst = appendOpt(dst, a.has(setTo), "to", a.To)
	dst = appendOpt(dst, a.has(setModel), "model", a.Model)
	dst = appendOpt(dst, a.has(setThinking), "thinking", a.Thinking)
	if a.has(setTimeout) {
		dst = append(dst, `,"timeoutSeconds":`...)
		dst = strconv.AppendInt(dst, a.TimeoutSeconds, 10)
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
