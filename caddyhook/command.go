package caddyhook

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddyhook/caddyhook/internal/cftoken"
	"github.com/caddyhook/caddyhook/internal/cli"
	"github.com/caddyhook/caddyhook/internal/importcmd"
	"github.com/caddyhook/caddyhook/internal/tmpl"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "hooks",
		Usage: "<command>",
		Short: "Commands for the hooks webhook ingress",
		Long: `
Tools for operating the hooks handler (caddyhook). Run "caddy hooks <command> --help"
for the details of each command.
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.AddCommand(hooksSubcommands()...)
		},
	})
}

// hooksSubcommands builds the subcommands of `caddy hooks`. Each entry is
// a constructor returning a fresh *cobra.Command, so tests can run a
// command in isolation; add new subcommands here.
func hooksSubcommands() []*cobra.Command {
	return append([]*cobra.Command{
		newTestCommand(),
		importcmd.Command(importEdge{}),
	}, cli.Commands()...)
}

// ImportEdge is the edge as `caddy hooks import` asks it
// (importcmd.Edge): every answer is the handler's own provisioning code.
// The import's own tests (internal/importcmd) translate through it.
func ImportEdge() importcmd.Edge { return importEdge{} }

// importEdge implements ImportEdge.
type importEdge struct{}

// BasePath implements importcmd.Edge.
func (importEdge) BasePath(p string) (string, error) {
	if err := validateBasePath(p); err != nil {
		return "", err
	}
	return cleanBasePath(p), nil
}

// GatewayAddr implements importcmd.Edge.
func (importEdge) GatewayAddr(addr string) error {
	_, err := parseGatewayAddr(addr)
	return err
}

// AgentID implements importcmd.Edge.
func (importEdge) AgentID(raw string) (string, bool) { return strictAgentID(raw) }

// AllowedAgentID implements importcmd.Edge.
func (importEdge) AllowedAgentID(raw string) string { return allowedAgentEntry(raw) }

// ForwardName is the name a forward mapping's match_path p answers, as
// the gateway's URL parser leaves it in a request path.
func (importEdge) ForwardName(p string) string { return gatewayEscape(p) }

// Policy implements importcmd.Edge.
func (importEdge) Policy(p importcmd.Policy) (importcmd.Checker, error) {
	pol, err := newPolicy(policyConfig{Agents: p.Agents, AllowedAgentIDs: p.AllowedAgentIDs, AllowedAgentIDsSet: p.AllowedAgentIDsSet,
		AllowRequestSessionKey: p.AllowRequestSessionKey, AllowedSessionKeyPrefixes: p.AllowedSessionKeyPrefixes,
		DefaultSessionKey: p.DefaultSessionKey, Channels: p.Channels, Forward: p.Forward})
	if err != nil {
		return nil, err
	}
	env, err := tmpl.NewEnv(0)
	if err != nil {
		return nil, err
	}
	rt := &router{policy: pol, allowRequestKey: p.AllowRequestSessionKey, forward: p.Forward}
	return importCheck{rt: rt, env: env}, nil
}

// importCheck compiles imported mappings as provisioning does
// (importcmd.Checker).
type importCheck struct {
	rt  *router
	env *tmpl.Env
}

// Mapping implements importcmd.Checker: the block is read as the
// Caddyfile adapter and the hooks directive read it.
func (c importCheck) Mapping(block cftoken.Node, n int) error {
	text, err := block.Text()
	if err != nil {
		return err
	}
	toks, err := caddyfile.Tokenize([]byte(text), "Caddyfile")
	if err != nil {
		return err
	}
	seg := caddyfile.Segment(toks)
	httpcaddyfile.NewShorthandReplacer().ApplyToSegment(&seg)
	d := caddyfile.NewDispenser(seg)
	d.Next()
	m, err := unmarshalMapping(d)
	if err != nil {
		return err
	}
	return c.check(&m, n)
}

// Preset implements importcmd.Checker.
func (c importCheck) Preset(name string, n int) (string, error) {
	ms, err := presetMappings([]string{name})
	if err != nil {
		return "", err
	}
	return ms[0].ID, c.check(&ms[0], n)
}

// check compiles m, the n-th mapping, and applies the session-key rules.
func (c importCheck) check(m *Mapping, n int) error {
	cm, err := c.rt.compileMapping(m, n, c.env)
	if err != nil {
		return err
	}
	return c.rt.checkMappingKey(cm)
}
