package caddyhook

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// actionKind says which gateway endpoint an action goes to.
type actionKind uint8

// The two action kinds of the gateway protocol.
const (
	kindWake actionKind = iota + 1
	kindAgent
)

// String returns the endpoint name of k ("wake" or "agent").
func (k actionKind) String() string {
	switch k {
	case kindWake:
		return "wake"
	case kindAgent:
		return "agent"
	}
	return "unknown"
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

// String names the source as a kept replay records it.
func (k keySource) String() string {
	switch k {
	case keyOperator:
		return "operator"
	case keyRequest:
		return "request"
	default:
		return "none"
	}
}

// action is one resolved wake or agent action on its way to the gateway.
type action struct {
	Kind actionKind

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
func (a *action) has(bit uint16) bool { return a.set&bit != 0 }

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
func decodeWake(f fields) (action, error) {
	a := action{Kind: kindWake, Mode: modeNow}
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

// jsTrim trims what JavaScript's String.prototype.trim does: Unicode
// white space, line terminators and U+FEFF (a byte order mark).
func jsTrim(s string) string {
	if s == "" || s[0] > ' ' && s[0] < utf8.RuneSelf && s[len(s)-1] > ' ' && s[len(s)-1] < utf8.RuneSelf {
		return s // the common case: nothing to trim
	}
	return strings.TrimFunc(s, isJSSpace)
}

// trimJSSpace trims what JavaScript's trim does (see jsTrim) from b.
func trimJSSpace(b []byte) []byte {
	if len(b) == 0 || b[0] > ' ' && b[0] < 0x80 && b[len(b)-1] > ' ' && b[len(b)-1] < 0x80 {
		return b
	}
	return bytes.TrimFunc(b, isJSSpace)
}

// isJSSpace reports the characters JavaScript's trim removes.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}
