package caddyhook

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddyhook/caddyhook/internal/cftoken"
	"github.com/caddyhook/caddyhook/internal/duration"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// unmarshalMapping parses a `mapping [<id>] { ... }` block (its syntax is
// in the Handler's doc).
//
// In a template, \n outside the {{ }} placeholders stands for a newline.
func unmarshalMapping(d *caddyfile.Dispenser) (Mapping, error) {
	var m Mapping
	if d.NextArg() {
		m.ID = d.Val()
	}
	if d.NextArg() {
		return m, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := unmarshalMappingOption(d, &m); err != nil {
			return m, err
		}
	}
	return m, nil
}

// unmarshalMappingOption parses one subdirective of a mapping block.
func unmarshalMappingOption(d *caddyfile.Dispenser, m *Mapping) error {
	strs := map[string]*string{
		"match_path": &m.MatchPath, "match_source": &m.MatchSource, "match_expr": &m.MatchExpr,
		"action": &m.Action, "wake_mode": &m.WakeMode, "name": &m.Name, "agent_id": &m.AgentID,
		"session_key": &m.SessionKey, "message_template": &m.MessageTemplate, "text_template": &m.TextTemplate,
		"channel": &m.Channel, "to": &m.To, "model": &m.Model, "thinking": &m.Thinking, "for_each": &m.ForEach,
	}
	name := d.Val()
	if dst, ok := strs[name]; ok {
		if err := oneArg(d, dst); err != nil {
			return err
		}
		*dst = cftoken.RestoreShorthands(*dst)
		if name != "match_expr" { // CEL reads its own \n escapes
			*dst = cftoken.Newlines(*dst)
		}
		return nil
	}
	switch name {
	case "deliver":
		var on bool
		if err := flagArg(d, &on); err != nil {
			return err
		}
		m.Deliver = &on
	case "timeout_seconds":
		return intArg(d, &m.TimeoutSeconds)
	case "allow_unsafe_external_content":
		return flagArg(d, &m.AllowUnsafeExternalContent)
	case "require_token":
		return flagArg(d, &m.RequireToken)
	case "forward":
		return flagArg(d, &m.Forward)
	case "max_body":
		return sizeArg(d, &m.MaxBody)
	case "transform":
		return unmarshalTransformRef(d, m)
	case "verify":
		v, err := unmarshalVerify(d)
		if err != nil {
			return err
		}
		m.Verify = v
	default:
		return d.Errf("unrecognized mapping subdirective '%s'", name)
	}
	return nil
}

// unmarshalTransformRef parses `transform <module> [<export>]` or a block
// with `module` and `export`.
func unmarshalTransformRef(d *caddyfile.Dispenser, m *Mapping) error {
	t := new(TransformRef)
	args := d.RemainingArgs()
	if len(args) > 2 {
		return d.ArgErr()
	}
	if len(args) > 0 {
		t.Module = args[0]
	}
	if len(args) > 1 {
		t.Export = args[1]
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "module":
			if err := oneArg(d, &t.Module); err != nil {
				return err
			}
		case "export":
			if err := oneArg(d, &t.Export); err != nil {
				return err
			}
		default:
			return d.Errf("unrecognized transform subdirective '%s'", d.Val())
		}
	}
	if t.Module == "" {
		return d.Errf("transform: module is required")
	}
	m.Transform = t
	return nil
}

// unmarshalVerify parses `verify <provider> { <word> <value>... }`: the
// provider is a name of the registry (`caddy hooks providers` lists
// them), the words are the registry's (verify.Words, applied by
// verify.Config.SetWord). Whether the provider reads a word is checked at
// provision, with the provider's words in the error.
func unmarshalVerify(d *caddyfile.Dispenser) (*verify.Config, error) {
	v := new(verify.Config)
	if !d.NextArg() {
		return nil, d.Errf("verify: provider required (one of %d; `caddy hooks providers` lists them)", len(verify.Names()))
	}
	v.Scheme = d.Val()
	if _, ok := verify.Lookup(v.Scheme); !ok {
		if s := verify.Suggest(v.Scheme); s != "" {
			return nil, d.Errf("verify: unknown provider %q; did you mean %q? (`caddy hooks providers` lists them)", v.Scheme, s)
		}
		return nil, d.Errf("verify: unknown provider %q (`caddy hooks providers` lists them)", v.Scheme)
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name, args := d.Val(), d.RemainingArgs()
		if name == "tolerance" && len(args) == 1 {
			// the Caddyfile's duration syntax (1d2h), as every duration
			// of the hooks blocks
			dur, err := duration.Parse(args[0])
			if err != nil {
				return nil, d.Errf("verify: tolerance %v", err)
			}
			v.Tolerance = dur
			continue
		}
		// a literal secret is accepted, with a warning at provision (see
		// warnLiteralSecrets): the same rule as for the tokens
		if err := v.SetWord(name, args); err != nil {
			return nil, d.Errf("verify: %v", err)
		}
	}
	return v, nil
}
