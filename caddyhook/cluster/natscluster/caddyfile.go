package natscluster

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddyhook/caddyhook/internal/duration"
)

// UnmarshalCaddyfile parses the engine's block:
//
//	nats [<url>...] {
//		url              <url>...
//		name             <name>
//		replicas         <n>
//		credentials      <file>
//		user             <user>
//		password         <password>
//		token            <token>
//		nkey             <seed file>
//		tls {
//			ca   <file>
//			cert <file>
//			key  <file>
//		}
//		timeout          <duration>
//		ack_wait         <duration>
//		duplicate_window <duration>
//		signing_key      <key> [<older key>...]
//		clock_skew       <duration>
//		accept_unsealed_until <RFC 3339 time>
//	}
//
// signing_key may be repeated; the first key seals, all of them open.
// accept_unsealed_until reads the unsealed records of a release without
// signing_key until then (the migration to signing_key).
func (n *NATS) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the engine name
	n.URLs = append(n.URLs, d.RemainingArgs()...)
	strs := map[string]*string{"name": &n.Name, "credentials": &n.Credentials, "user": &n.User,
		"password": &n.Password, "token": &n.Token, "nkey": &n.NKey, "accept_unsealed_until": &n.AcceptUnsealedUntil}
	for d.NextBlock(0) {
		if dst, ok := strs[d.Val()]; ok {
			if err := oneArg(d, dst); err != nil {
				return err
			}
			continue
		}
		switch d.Val() {
		case "url", "urls":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			n.URLs = append(n.URLs, args...)
		case "replicas":
			var s string
			if err := oneArg(d, &s); err != nil {
				return err
			}
			v, err := strconv.Atoi(s)
			if err != nil {
				return d.Errf("replicas: %v", err)
			}
			n.Replicas = v
		case "tls":
			if d.NextArg() {
				return d.ArgErr()
			}
			n.TLS = new(TLS)
			for d.NextBlock(1) {
				var dst *string
				switch d.Val() {
				case "ca":
					dst = &n.TLS.CA
				case "cert":
					dst = &n.TLS.Cert
				case "key":
					dst = &n.TLS.Key
				default:
					return d.Errf("tls: unknown option %q", d.Val())
				}
				if err := oneArg(d, dst); err != nil {
					return err
				}
			}
		case "signing_key", "signing_keys":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			n.SigningKeys = append(n.SigningKeys, args...)
		case "timeout", "ack_wait", "duplicate_window", "clock_skew":
			opt := d.Val()
			var s string
			if err := oneArg(d, &s); err != nil {
				return err
			}
			v, err := duration.Parse(s)
			if err != nil {
				return d.Errf("%s: %v", opt, err)
			}
			switch opt {
			case "timeout":
				n.Timeout = caddy.Duration(v)
			case "ack_wait":
				n.AckWait = caddy.Duration(v)
			case "clock_skew":
				n.ClockSkew = caddy.Duration(v)
			default:
				n.DuplicateWindow = caddy.Duration(v)
			}
		default:
			return d.Errf("cluster nats: unknown option %q", d.Val())
		}
	}
	return nil
}

// oneArg reads exactly one argument into dst.
func oneArg(d *caddyfile.Dispenser, dst *string) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	*dst = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*NATS)(nil)
