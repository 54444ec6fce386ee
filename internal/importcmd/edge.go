package importcmd

// Edge is what the translation asks of caddyhook: whether the edge
// accepts the values the generated file will hold, answered by the
// edge's own provisioning code, so that a value the edge would refuse is
// refused (or noted and left out) here, and the generated file always
// loads. caddyhook's command.go implements it.
type Edge interface {
	// BasePath checks a base path as the edge's path option does and
	// returns it cleaned; the error names the path option.
	BasePath(p string) (string, error)
	// GatewayAddr checks a gateway address as the edge's gateway option does.
	GatewayAddr(addr string) error
	// AgentID normalises an agent id as the gateway and the edge do; ok is
	// false when nothing usable is left.
	AgentID(raw string) (id string, ok bool)
	// AllowedAgentID is an allowed_agent_ids entry as the edge reads it:
	// "" (ignored), "*" (any agent) or the normalised id.
	AllowedAgentID(raw string) string
	// Policy compiles p as the edge will; the Checker checks mappings
	// under it.
	Policy(p Policy) (Checker, error)
}

// Checker checks mappings as the edge's provisioning does under one
// policy (fields, templates and CEL, the session-key rules), without
// their transforms (the translation checks those itself).
type Checker interface {
	// Mapping checks m, the n-th mapping (1-based, for its default id).
	Mapping(m Mapping, n int) error
	// Preset checks the edge's own preset name as the n-th mapping and
	// returns its mapping id.
	Preset(name string, n int) (id string, err error)
}

// Policy is the session and agent policy of the generated hooks block,
// the values of its options.
type Policy struct {
	Agents                    []string
	AllowedAgentIDs           []string
	AllowedAgentIDsSet        bool // allowed_agent_ids is written (empty: no explicit agent)
	AllowRequestSessionKey    bool
	AllowedSessionKeyPrefixes []string
	DefaultSessionKey         string
	Channels                  []string
	Forward                   bool // mode forward
}

// Mapping is a mapping block of the generated file. Its JSON is the
// hooks handler's mapping JSON (the same keys), which is how the edge
// reads it for Checker.Mapping.
type Mapping struct {
	ID                         string        `json:"id,omitempty"`
	MatchPath                  string        `json:"match_path,omitempty"`
	MatchSource                string        `json:"match_source,omitempty"`
	Action                     string        `json:"action,omitempty"`
	WakeMode                   string        `json:"wake_mode,omitempty"`
	Name                       string        `json:"name,omitempty"`
	AgentID                    string        `json:"agent_id,omitempty"`
	SessionKey                 string        `json:"session_key,omitempty"`
	MessageTemplate            string        `json:"message_template,omitempty"`
	TextTemplate               string        `json:"text_template,omitempty"`
	Channel                    string        `json:"channel,omitempty"`
	To                         string        `json:"to,omitempty"`
	Model                      string        `json:"model,omitempty"`
	Thinking                   string        `json:"thinking,omitempty"`
	Deliver                    *bool         `json:"deliver,omitempty"`
	TimeoutSeconds             int           `json:"timeout_seconds,omitempty"`
	AllowUnsafeExternalContent bool          `json:"allow_unsafe_external_content,omitempty"`
	ForEach                    string        `json:"for_each,omitempty"`
	MaxBody                    int64         `json:"max_body,omitempty"`
	Transform                  *TransformRef `json:"transform,omitempty"`
	Forward                    bool          `json:"forward,omitempty"`
}

// TransformRef names a mapping's transform module and its export.
type TransformRef struct {
	Module string `json:"module,omitempty"`
	Export string `json:"export,omitempty"`
}
