package caddyhook

import (
	"strconv"

	"github.com/google/uuid"

	"github.com/caddyhook/caddyhook/internal/boundary"
)

// eventNamespace derives deterministic event ids from idempotency keys, so
// a replay (even after a restart) reaches the gateway with the same
// Idempotency-Key.
var eventNamespace = uuid.MustParse("6f1b1c39-5b0e-4c1a-9d55-2f3f0e1c6a7b")

// prepared is a request ready for the gateway: a rendered action or a
// forwarded request, its event id (the reply's runId in spool mode) and,
// for a wake, its mode.
type prepared struct {
	gatewayRequest
	mode    string
	eventID string
	// forward: the gateway's answer is the sender's (see answer).
	forward bool
	// wakeLane: spooled in the wake lane (acceptance order) whatever
	// kind's reply shape (a forward wake mapping's request)
	wakeLane bool
	// keySource says who chose the session key the edge's policy
	// resolved (kept for a replay, which goes through the policy again).
	keySource keySource
}

// prepare applies the content boundary (applyBoundary; the external-content
// wrapper only when the edge wraps: wrapEdge), encodes the gateway body for
// gw and assigns the event id, which is also the Idempotency-Key: eventID
// when the request was idempotent, else a random one.
func prepare(a *action, eventID string, wrapEdge bool, gw *gatewayClient) prepared {
	if eventID == "" {
		eventID = uuid.NewString()
	}
	if a.Kind == kindAgent && !a.AllowUnsafe && !wrapEdge {
		u := *a
		u.AllowUnsafe = true // wrap gateway: the gateway wraps every external message itself
		a = &u
	}
	a = applyBoundary(a)
	g := gatewayRequest{kind: a.Kind, body: a.appendGatewayBody(make([]byte, 0, 256+len(a.Message))), idemKey: eventID}
	if a.Wait {
		g.timeout = gw.waitTimeoutFor(a.TimeoutSeconds)
	}
	return prepared{gatewayRequest: g, mode: a.Mode, eventID: eventID, keySource: a.keySource}
}

// applyBoundary returns a as the gateway must see it: an agent message
// wrapped (unless the mapping allows unsafe content) and its name
// sanitised; a wake text that a mapping built from the payload with its
// markers and control tokens neutralised (a wake has no wrapper: it
// becomes a system event). Direct /wake text comes from the token holder
// and passes unchanged, as it does through the gateway.
func applyBoundary(a *action) *action {
	w := *a
	switch {
	case a.Kind == kindAgent:
		w.Name = boundary.SanitizeName(a.Name)
		if !a.AllowUnsafe {
			w.Message = boundary.Wrap(a.Message, a.Source)
		}
	case a.Kind == kindWake && a.Source != "" && !a.AllowUnsafe:
		w.Text = boundary.Sanitize(a.Text)
	default:
		return a
	}
	return &w
}

// actionSeeds derives one event id per action of an idempotent request
// from the key, the action's position and its content as requested. A
// replay, even after a restart, reaches the gateway with the same
// Idempotency-Keys; the ids also identify the request in the cache.
func actionSeeds(key string, acts []action) []string {
	ids := make([]string, len(acts))
	var buf []byte
	for i := range acts {
		buf = append(buf[:0], key...)
		buf = append(buf, 0, byte(acts[i].Kind))
		buf = strconv.AppendInt(buf, int64(i), 10)
		buf = acts[i].appendGatewayBody(append(buf, 0))
		ids[i] = uuid.NewSHA1(eventNamespace, buf).String()
	}
	return ids
}

// appendGatewayBody appends the JSON body the gateway receives for a.
// Message must already be wrapped. Only explicitly set optional fields are
// written; agentId and sessionKey are the resolved ones (a wake carries
// them only when the request named them).
func (a *action) appendGatewayBody(dst []byte) []byte {
	if a.Kind == kindWake {
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
