package importcmd

import "github.com/caddyhook/caddyhook/internal/cftoken"

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
	// ForwardName is the request name a forward mapping's match_path p
	// answers: p as the gateway's URL parser leaves it in a request path
	// (percent-encoding what it encodes, escapes kept).
	ForwardName(p string) string
	// Policy compiles p as the edge will; the Checker checks mappings
	// under it.
	Policy(p Policy) (Checker, error)
}

// Checker checks mappings as the edge's provisioning does under one
// policy (fields, templates and CEL, the session-key rules), without
// their transforms (the translation checks those itself).
type Checker interface {
	// Mapping checks block, a mapping block as the generated file holds
	// it, as the edge reads and compiles it (the n-th mapping, 1-based,
	// for its default id).
	Mapping(block cftoken.Node, n int) error
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
