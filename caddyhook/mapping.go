package caddyhook

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// Mapping turns a custom hook's payload into one or more wake or agent
// actions. Its string fields are templates: `{{ payload.path }}` (or a bare
// payload path such as `messages[0].subject`), `{{ headers.x-name }}`,
// `{{ query.name }}`, `{{ path }}`, `{{ now }}` or `{{ cel: <expression> }}`.
// JSON also accepts the reference gateway's camelCase mapping shape
// (match.path, messageTemplate, …) unchanged.
type Mapping struct {
	// ID names the mapping in errors and logs (default mapping-<n>).
	ID string `json:"id,omitempty"`
	// MatchPath is the hook name it answers (slashes trimmed); empty = any.
	// A render mapping compares it with the decoded name; a forward
	// mapping, as the gateway compares its match.path, with the name as
	// the gateway's URL parser leaves it (café and caf%C3%A9 both answer
	// /hooks/caf%C3%A9; a%2Fb answers /hooks/a%2Fb, not /hooks/a/b).
	MatchPath string `json:"match_path,omitempty"`
	// MatchSource requires the payload's top-level "source" to equal it.
	MatchSource string `json:"match_source,omitempty"`
	// MatchExpr is a boolean CEL expression over payload, headers, query,
	// path and now.
	MatchExpr string `json:"match_expr,omitempty"`
	// Action is "agent" (default) or "wake". On a forward mapping it is
	// only the spool lane: a wake mapping's requests are delivered in
	// acceptance order, as /wake's are (the gateway's mapping decides what
	// they do; `caddy hooks import` writes it for the gateway's wake
	// mappings).
	Action string `json:"action,omitempty"`
	// WakeMode is now (default) or next-heartbeat.
	WakeMode string `json:"wake_mode,omitempty"`
	// Name is the agent hook name template (default Hook).
	Name string `json:"name,omitempty"`
	// AgentID is the agent id template.
	AgentID string `json:"agent_id,omitempty"`
	// SessionKey is the session key: a literal key is operator-set; a
	// templated one counts as request-supplied.
	SessionKey string `json:"session_key,omitempty"`
	// MessageTemplate renders the agent message.
	MessageTemplate string `json:"message_template,omitempty"`
	// TextTemplate renders the wake text.
	TextTemplate string `json:"text_template,omitempty"`
	// Channel, To, Model and Thinking are templates for those agent fields.
	Channel  string `json:"channel,omitempty"`
	To       string `json:"to,omitempty"`
	Model    string `json:"model,omitempty"`
	Thinking string `json:"thinking,omitempty"`
	// Deliver sets the agent's deliver flag.
	Deliver *bool `json:"deliver,omitempty"`
	// TimeoutSeconds caps the agent run.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// AllowUnsafeExternalContent skips the safety wrapper (trusted sources only).
	AllowUnsafeExternalContent bool `json:"allow_unsafe_external_content,omitempty"`
	// ForEach names a top-level payload list: one action per element
	// (at most 200), which templates see as element 0 of that list.
	ForEach string `json:"for_each,omitempty"`
	// MaxBody sets the body limit for this mapping's requests.
	MaxBody int64 `json:"max_body,omitempty"`
	// Transform runs a JS/TS module to produce or adjust the action.
	Transform *TransformRef `json:"transform,omitempty"`
	// Verify accepts requests signed by a provider instead of the token.
	Verify *verify.Config `json:"verify,omitempty"`
	// RequireToken demands the hook token as well as the signature.
	RequireToken bool `json:"require_token,omitempty"`
	// Forward forwards the hook's request as sent to the gateway's own
	// {gateway_prefix}/<name> instead of rendering it: for a gateway that
	// maps the hook itself. Only the match, max_body, verify and
	// require_token fields go with it.
	Forward bool `json:"forward,omitempty"`
}

// TransformRef names a transform module (relative to the transforms
// directory) and its export (default: default, else transform).
type TransformRef struct {
	// Module is the module's file, relative to the transforms directory
	// (.ts, .mts, .js, .mjs or .cjs).
	Module string `json:"module,omitempty"`
	// Export names the function to call (default: the default export,
	// else one named transform).
	Export string `json:"export,omitempty"`
}

// referenceMapping is the reference gateway's mapping shape.
type referenceMapping struct {
	Match *struct {
		Path   string `json:"path"`
		Source string `json:"source"`
	} `json:"match"`
	WakeMode                   string `json:"wakeMode"`
	AgentID                    string `json:"agentId"`
	SessionKey                 string `json:"sessionKey"`
	MessageTemplate            string `json:"messageTemplate"`
	TextTemplate               string `json:"textTemplate"`
	TimeoutSeconds             int    `json:"timeoutSeconds"`
	AllowUnsafeExternalContent bool   `json:"allowUnsafeExternalContent"`
	ForEach                    string `json:"forEach"`
}

// UnmarshalJSON reads a mapping in our snake_case shape or the reference
// gateway's camelCase one.
func (m *Mapping) UnmarshalJSON(b []byte) error {
	type plain Mapping
	if err := json.Unmarshal(b, (*plain)(m)); err != nil {
		return err
	}
	var ref referenceMapping
	if err := json.Unmarshal(b, &ref); err != nil {
		return err
	}
	if ref.Match != nil {
		m.MatchPath = orString(m.MatchPath, ref.Match.Path)
		m.MatchSource = orString(m.MatchSource, ref.Match.Source)
	}
	m.WakeMode = orString(m.WakeMode, ref.WakeMode)
	m.AgentID = orString(m.AgentID, ref.AgentID)
	m.SessionKey = orString(m.SessionKey, ref.SessionKey)
	m.MessageTemplate = orString(m.MessageTemplate, ref.MessageTemplate)
	m.TextTemplate = orString(m.TextTemplate, ref.TextTemplate)
	m.ForEach = orString(m.ForEach, ref.ForEach)
	if m.TimeoutSeconds == 0 {
		m.TimeoutSeconds = ref.TimeoutSeconds
	}
	m.AllowUnsafeExternalContent = m.AllowUnsafeExternalContent || ref.AllowUnsafeExternalContent
	return nil
}

func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Gmail push batches carry up to about 100 messages; the reference bounds
// the gmail path at min(32 MiB, 100 × (3 × 20,000 + 8,192)) bytes.
const gmailMaxBody = 100 * (3*20000 + 8192)

// presetMappings returns the built-in mappings for the named presets, in
// the order given; they are matched after the configured mappings. In
// forward mode only their ids, paths and body limits are used.
func presetMappings(names []string) ([]Mapping, error) {
	var out []Mapping
	for _, n := range names {
		switch strings.ToLower(strings.TrimSpace(n)) {
		case "gmail":
			out = append(out, gmailPreset())
		default:
			return nil, fmt.Errorf("presets: unknown preset %q (known: gmail)", n)
		}
	}
	return slices.Clip(out), nil
}

// gmailPreset is the reference gateway's Gmail push mapping: one agent
// run per message of the batch.
func gmailPreset() Mapping {
	return Mapping{
		ID:         "gmail",
		MatchPath:  "gmail",
		Action:     "agent",
		WakeMode:   modeNow,
		Name:       "Gmail",
		ForEach:    "messages",
		SessionKey: "hook:gmail:{{messages[0].id}}",
		MessageTemplate: "New email from {{messages[0].from}}\nSubject: {{messages[0].subject}}\n" +
			"{{messages[0].snippet}}\n{{messages[0].body}}",
		MaxBody: gmailMaxBody,
	}
}
