package caddyhook

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/lockout"
)

func init() {
	httpcaddyfile.RegisterDirective("hooks", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("hooks", httpcaddyfile.Before, "respond")
}

// parseCaddyfile sets up the handler from Caddyfile tokens. hooks is a
// plain directive, not a handler directive: a handler directive's leading
// /path argument would be taken as a request matcher, not the base path.
func parseCaddyfile(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	hk := new(Handler)
	if err := hk.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	return h.NewRoute(nil, hk), nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens: the
// hooks directive, whose syntax is in the Handler's doc.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	file := d.File()
	if d.NextArg() {
		h.Path = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		if err := h.unmarshalOption(d); err != nil {
			return err
		}
	}
	if h.TransformsRoot == "" && usesTransforms(h.Mappings) {
		h.TransformsRoot = caddyfilePath(file, defaultTransformsRoot)
	}
	return nil
}

// unmarshalOption parses one subdirective of the hooks block.
func (h *Handler) unmarshalOption(d *caddyfile.Dispenser) error {
	switch name := d.Val(); name {
	case "path":
		return oneArg(d, &h.Path)
	case "token":
		// repeatable (a rotation): the first is token, the others tokens
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("token: expected a value, e.g. token {env.HOOK_TOKEN}")
		}
		for _, t := range args {
			if h.Token == "" {
				h.Token = t
			} else {
				h.Tokens = append(h.Tokens, t)
			}
		}
		return nil
	case "token_headers":
		return listArg(d, &h.TokenHeaders, true)
	case "unauthenticated_bodies":
		u, err := unmarshalUnauthBodies(d)
		if err == nil {
			h.UnauthenticatedBodies = u
		}
		return err
	case "body_timeout":
		return durationArg(d, &h.BodyTimeout)
	case "gateway":
		return oneArg(d, &h.Gateway)
	case "gateway_token":
		return oneArg(d, &h.GatewayToken)
	case "gateway_prefix":
		return oneArg(d, &h.GatewayPrefix)
	case "default_session_key":
		return oneArg(d, &h.DefaultSessionKey)
	case "gateway_timeout":
		return durationArg(d, &h.GatewayTimeout)
	case "gateway_wait_timeout":
		return durationArg(d, &h.GatewayWaitTimeout)
	case "mode":
		return choiceArg(d, &h.Mode, modeRender, modeForward)
	case "wrap":
		return choiceArg(d, &h.Wrap, wrapByEdge, wrapByGW)
	case "idempotency_headers":
		return listArg(d, &h.IdempotencyHeaders, true)
	case "lockout":
		return durationArg(d, &h.Lockout)
	case "idempotency_ttl":
		return durationArg(d, &h.IdempotencyTTL)
	case "max_body":
		return sizeArg(d, &h.MaxBody)
	case "lockout_table_size":
		return intArg(d, &h.LockoutTableSize)
	case "ipv6_prefix":
		return intArg(d, &h.IPv6Prefix)
	case "gateway_forward_client_ip":
		return flagArg(d, &h.GatewayForwardClientIP)
	case "allow_request_session_key":
		return flagArg(d, &h.AllowRequestSessionKey)
	case "enabled":
		var on bool
		if err := flagArg(d, &on); err != nil {
			return err
		}
		h.Enabled = &on
		return nil
	case "agents":
		return listArg(d, &h.Agents, true)
	case "allowed_session_key_prefixes":
		return listArg(d, &h.AllowedSessionKeyPrefixes, true)
	case "allowed_models":
		return listArg(d, &h.AllowedModels, true)
	case "channels":
		return listArg(d, &h.Channels, true)
	case "allowed_agent_ids":
		ids := []string{}
		if err := listArg(d, &ids, false); err != nil {
			return err
		}
		h.AllowedAgentIDs = &ids
		return nil
	case "auth_failures":
		af, err := unmarshalAuthFailures(d)
		if err == nil {
			h.AuthFailures = af
		}
		return err
	case "spool":
		sc, err := unmarshalSpool(d)
		if err == nil {
			h.Spool = sc
		}
		return err
	case "events":
		ec, err := unmarshalEvents(d)
		if err == nil {
			h.Events = ec
		}
		return err
	case "cluster":
		raw, err := unmarshalCluster(d)
		if err == nil {
			h.ClusterRaw = raw
		}
		return err
	case "mapping":
		m, err := unmarshalMapping(d)
		if err != nil {
			return err
		}
		h.Mappings = append(h.Mappings, m)
		return nil
	case "presets":
		return listArg(d, &h.Presets, true)
	case "cel_cost_limit":
		var n int
		if err := intArg(d, &n); err != nil {
			return err
		}
		if n <= 0 {
			return d.Errf("cel_cost_limit: must be a positive integer, got %d", n)
		}
		h.CELCostLimit = uint64(n)
		return nil
	case "transforms_root":
		if err := oneArg(d, &h.TransformsRoot); err != nil {
			return err
		}
		h.TransformsRoot = caddyfilePath(d.File(), h.TransformsRoot)
		return nil
	case "transforms_dir":
		return oneArg(d, &h.TransformsDir)
	case "transform_timeout":
		return durationArg(d, &h.TransformTimeout)
	case "transform_max_memory":
		return sizeArg(d, &h.TransformMaxMemory)
	default:
		return d.Errf("unrecognized hooks subdirective '%s'", name)
	}
}

// unmarshalAuthFailures parses `auth_failures <count> [<window>]`.
func unmarshalAuthFailures(d *caddyfile.Dispenser) (*AuthFailures, error) {
	n, w, err := countAndDuration(d, "count", lockout.MaxCount, "window")
	if err != nil {
		return nil, err
	}
	return &AuthFailures{Count: n, Window: w}, nil
}

// unmarshalUnauthBodies parses `unauthenticated_bodies [<max> [<timeout>]]
// [{ per_address <n>, per_prefix /<bits> <n>... }]` (per_prefix repeatable).
func unmarshalUnauthBodies(d *caddyfile.Dispenser) (*UnauthenticatedBodies, error) {
	u := new(UnauthenticatedBodies)
	if d.CountRemainingArgs() > 0 {
		var err error
		if u.Max, u.Timeout, err = countAndDuration(d, "max", 1<<16, "timeout"); err != nil {
			return nil, err
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "per_address":
			if err := intArg(d, &u.PerAddress); err != nil {
				return nil, err
			}
			if u.PerAddress < 1 || u.PerAddress > 1<<16 {
				return nil, d.Errf("unauthenticated_bodies: per_address %d must be between 1 and 65536", u.PerAddress)
			}
		case "per_prefix":
			var pc PrefixCap
			args := d.RemainingArgs()
			if len(args) != 2 {
				return nil, d.Errf("unauthenticated_bodies: per_prefix: expected /<bits> <max>, e.g. per_prefix /48 32")
			}
			bits, err1 := strconv.Atoi(strings.TrimPrefix(args[0], "/"))
			n, err2 := strconv.Atoi(args[1])
			if err1 != nil || err2 != nil {
				return nil, d.Errf("unauthenticated_bodies: per_prefix %s %s: expected /<bits> <max>, e.g. per_prefix /48 32", args[0], args[1])
			}
			pc.Bits, pc.Max = bits, n
			u.PerPrefix = append(u.PerPrefix, pc)
		default:
			return nil, d.Errf("unrecognized unauthenticated_bodies subdirective '%s'", d.Val())
		}
	}
	if u.Max == 0 && u.PerAddress == 0 && len(u.PerPrefix) == 0 {
		return nil, d.Errf("unauthenticated_bodies: expected <max> [<timeout>] or a block with per_address or per_prefix")
	}
	return u, nil
}

// unmarshalSpool parses `spool <dir> { ... }`.
func unmarshalSpool(d *caddyfile.Dispenser) (*SpoolConfig, error) {
	sc := new(SpoolConfig)
	if !d.NextArg() {
		return nil, d.Errf("spool: directory required")
	}
	sc.Dir = d.Val()
	if sc.Dir == "cluster" { // a directory named so: ./cluster
		sc.Dir, sc.Cluster = "", true
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "deliver", "fallback":
			err = unmarshalClusterSpool(d, sc)
		case "max_bytes":
			err = sizeArg(d, &sc.MaxBytes)
		case "max_age":
			err = durationArg(d, &sc.MaxAge)
		case "retry_initial":
			err = durationArg(d, &sc.RetryInitial)
		case "retry_max":
			err = durationArg(d, &sc.RetryMax)
		case "workers":
			err = intArg(d, &sc.Workers)
		case "rate":
			err = rateArg(d, &sc.Rate)
		case "max_identical_errors":
			err = intArg(d, &sc.MaxIdenticalErrors)
		default:
			err = d.Errf("unrecognized spool subdirective '%s'", d.Val())
		}
		if err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// unmarshalClusterSpool parses `deliver on|off` and `fallback <dir>|reject`
// of a `spool cluster` block.
func unmarshalClusterSpool(d *caddyfile.Dispenser, sc *SpoolConfig) error {
	name := d.Val()
	if !sc.Cluster {
		return d.Errf("spool: %s is an option of spool cluster", name)
	}
	if name == "fallback" {
		return oneArg(d, &sc.Fallback)
	}
	var v string
	if err := oneArg(d, &v); err != nil {
		return err
	}
	var on bool
	switch v {
	case "on", "true":
		on = true
	case "off", "false":
	default:
		return d.Errf("spool: deliver: expected on or off, got %q", v)
	}
	sc.Deliver = &on
	return nil
}

// unmarshalCluster parses `cluster <engine> …` into the engine module.
func unmarshalCluster(d *caddyfile.Dispenser) (json.RawMessage, error) {
	if !d.NextArg() {
		return nil, d.Errf("cluster: expected an engine name, e.g. cluster nats { … }")
	}
	name := d.Val()
	unm, err := caddyfile.UnmarshalModule(d, cluster.Namespace+"."+name)
	if err != nil {
		return nil, err
	}
	return caddyconfig.JSONModuleObject(unm, "engine", name, nil), nil
}

// unmarshalEvents parses `events off|on` or `events { … }`.
func unmarshalEvents(d *caddyfile.Dispenser) (*EventsConfig, error) {
	ec := new(EventsConfig)
	if d.NextArg() {
		switch d.Val() {
		case "off":
			ec.Disabled = true
		case "on":
		default:
			return nil, d.Errf("events: expected on, off or a block, got %q", d.Val())
		}
		if d.NextArg() {
			return nil, d.ArgErr()
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if ec.Disabled {
			return nil, d.Errf("events: off takes no block")
		}
		var err error
		switch d.Val() {
		case "bodies":
			var v string
			if err = oneArg(d, &v); err == nil {
				switch v {
				case "on":
					ec.Bodies = true
				case "off":
					ec.Bodies = false
				default:
					err = d.Errf("events: bodies: expected on or off, got %q", v)
				}
			}
		case "max_body":
			err = sizeArg(d, &ec.MaxBody)
		case "max_events":
			err = intArg(d, &ec.MaxEvents)
		case "max_bytes":
			err = sizeArg(d, &ec.MaxBytes)
		case "retain":
			err = durationArg(d, &ec.Retain)
		case "max_rejections":
			err = intArg(d, &ec.MaxRejections)
		case "dir":
			err = oneArg(d, &ec.Dir)
		case "headers":
			err = listArg(d, &ec.Headers, true)
		default:
			err = d.Errf("unrecognized events subdirective '%s'", d.Val())
		}
		if err != nil {
			return nil, err
		}
	}
	return ec, nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
