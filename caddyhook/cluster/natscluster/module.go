// Package natscluster is caddyhook's NATS JetStream cluster engine, the
// Caddy module http.handlers.hooks.cluster.nats.
//
// Per namespace name it creates (or verifies) with the configured replicas:
//
//	stream HOOKS_<name>_QUEUE   subjects hooks.<name>.queue.{wake,agent}, work queue, deduplicated by event id
//	stream HOOKS_<name>_DEAD    subject  hooks.<name>.dead, the dead letters with their reason
//	bucket hooks_<name>_locks   lockout locks, TTL = the longest lock
//	bucket hooks_<name>_idem    idempotency claims and first replies, TTL = idempotency_ttl
//	subject hooks.<name>.auth     the lockout members' announcements (core NATS)
//	subject hooks.<name>.auth.<member>  failures sent to the member owning their count, its confirmations
//	subject hooks.<name>.deliver  the delivery nodes' announcements
//	subject hooks.<name>.outcome  dispatch outcomes and operator actions, for the event logs (core NATS)
//	subject hooks.<name>.view     the cluster view's requests; answers and tail batches go to the asker's inbox (core NATS)
//
// and two durable pull consumers, wake (one event in flight cluster-wide,
// so wake events keep their acceptance order) and agent.
package natscluster

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/secret"
)

func init() {
	caddy.RegisterModule(new(NATS))
}

// Defaults.
const (
	defaultURL       = "nats://127.0.0.1:4222"
	defaultTimeout   = 2 * time.Second
	defaultAckWait   = 30 * time.Second
	defaultDupWindow = time.Hour
)

// TLS are the client's TLS settings (PEM files).
type TLS struct {
	// CA verifies the server (default: the system roots).
	CA string `json:"ca,omitempty"`
	// Cert and Key are the client certificate, for servers that verify it.
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
}

// NATS is the NATS JetStream cluster engine.
type NATS struct {
	Config

	logger *zap.Logger
	mu     sync.Mutex
	opened []*handle
}

// Config are the engine's settings.
type Config struct {
	// URLs are the servers (default nats://127.0.0.1:4222); any one of a
	// cluster is enough, the client learns the others.
	URLs []string `json:"urls,omitempty"`
	// Name namespaces every stream, bucket and subject (default: from
	// the handler's base path).
	Name string `json:"name,omitempty"`
	// Replicas is the JetStream replica count of what caddyhook creates
	// (default 1; 3 on a 3-node cluster).
	Replicas int `json:"replicas,omitempty"`
	// Credentials is a .creds file (JWT and NKey seed).
	Credentials string `json:"credentials,omitempty"`
	// User and Password authenticate with a user name.
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	// Token authenticates with a token.
	Token string `json:"token,omitempty"`
	// NKey is a file holding an NKey seed (SU…).
	NKey string `json:"nkey,omitempty"`
	// TLS, when set, requires TLS to the servers.
	TLS *TLS `json:"tls,omitempty"`
	// Timeout bounds connecting and each operation (default 2s).
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// AckWait is how long a delivery node may stay silent about an event
	// before another gets it (default 30s; must exceed gateway_timeout).
	AckWait caddy.Duration `json:"ack_wait,omitempty"`
	// DuplicateWindow is how long the queue remembers event ids to drop
	// duplicates (default 1h).
	DuplicateWindow caddy.Duration `json:"duplicate_window,omitempty"`
	// SigningKeys (required) seal every record a node writes to NATS:
	// queued events, dead letters, idempotency records, locks and failure
	// broadcasts; a node drops, counts and logs what does not open with
	// one of them. The first key seals, every key opens (rotation). A
	// secret shared by every node: {env.…} or {file.…}, at least 32
	// bytes.
	SigningKeys []string `json:"signing_keys,omitempty"`
	// ClockSkew is how far ahead of this node's clock a time read from
	// another node may be; later ones are clamped (default 2s, at most 10m).
	ClockSkew caddy.Duration `json:"clock_skew,omitempty"`
	// AcceptUnsealedUntil (an RFC 3339 time) makes the node read, until
	// then, the unsealed queued events, dead letters and idempotency
	// records that a release without signing_key wrote, so that moving a
	// cluster to signing_key drops nothing; from then on they are refused
	// as any record that does not open. At most 30 days ahead.
	AcceptUnsealedUntil string `json:"accept_unsealed_until,omitempty"`

	keyring       *cluster.Keyring // from SigningKeys, expanded
	unsealedUntil time.Time        // AcceptUnsealedUntil, parsed
	level         *int             // the cluster level to run at (tests: an older node); nil: this build's
}

// CaddyModule returns the Caddy module information.
func (*NATS) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  cluster.Namespace + ".nats",
		New: func() caddy.Module { return new(NATS) },
	}
}

// Provision expands placeholders and validates the settings.
func (n *NATS) Provision(ctx caddy.Context) error {
	return n.setup(ctx.Logger())
}

// New returns an engine with cfg outside a Caddy config, for a Go
// program that uses the engine without Caddy (the package's tests do);
// a nil logger logs nothing.
func New(cfg Config, logger *zap.Logger) (*NATS, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	n := &NATS{Config: cfg}
	if err := n.setup(logger); err != nil {
		return nil, err
	}
	return n, nil
}

// setup validates the settings (filling defaults) and warns about risky
// ones: what Provision and New share.
func (n *NATS) setup(logger *zap.Logger) error {
	n.logger = logger
	if err := n.Config.validate(); err != nil {
		return err
	}
	n.Config.warn(logger)
	return nil
}

// validate fills defaults and refuses bad values, naming the field.
func (n *Config) validate() error {
	if len(n.URLs) == 0 {
		n.URLs = []string{defaultURL}
	}
	for _, u := range n.URLs {
		if !strings.Contains(u, "://") && strings.Contains(u, " ") {
			return fmt.Errorf("cluster nats: url %q is not a server address", u)
		}
	}
	if n.Name != "" {
		if err := cluster.ValidateName(n.Name); err != nil {
			return fmt.Errorf("cluster nats: %w", err)
		}
	}
	if n.Replicas == 0 {
		n.Replicas = 1
	}
	if n.Replicas < 1 || n.Replicas > 5 {
		return fmt.Errorf("cluster nats: replicas %d must be between 1 and 5", n.Replicas)
	}
	auth := 0
	for _, set := range []bool{n.Credentials != "", n.User != "", n.Token != "", n.NKey != ""} {
		if set {
			auth++
		}
	}
	if auth > 1 {
		return fmt.Errorf("cluster nats: use one of credentials, user/password, token, nkey")
	}
	if (n.User == "") != (n.Password == "") {
		return fmt.Errorf("cluster nats: user and password go together")
	}
	if n.TLS != nil && (n.TLS.Cert == "") != (n.TLS.Key == "") {
		return fmt.Errorf("cluster nats: tls cert and key go together")
	}
	// a secret (or a secret's file) written as a placeholder that
	// expands to nothing fails here, naming the field and the variable
	for _, f := range []struct{ name, raw string }{{"user", n.User}, {"password", n.Password}, {"token", n.Token},
		{"credentials", n.Credentials}, {"nkey", n.NKey}} {
		if _, err := secret.Required("cluster nats: "+f.name, f.raw); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, path string }{{"credentials", n.Credentials}, {"nkey", n.NKey}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(expand(f.path)); err != nil {
			return fmt.Errorf("cluster nats: %s: %w", f.name, err)
		}
	}
	if n.Timeout < 0 || n.AckWait < 0 || n.DuplicateWindow < 0 {
		return fmt.Errorf("cluster nats: timeout, ack_wait and duplicate_window must be positive")
	}
	if n.Timeout == 0 {
		n.Timeout = caddy.Duration(defaultTimeout)
	}
	if n.AckWait == 0 {
		n.AckWait = caddy.Duration(defaultAckWait)
	}
	if n.DuplicateWindow == 0 {
		n.DuplicateWindow = caddy.Duration(defaultDupWindow)
	}
	return n.validateTrust()
}

// Open implements cluster.Engine: the backend of this connection and
// namespace, shared across reloads through a usage pool.
func (n *NATS) Open(p cluster.Params) (cluster.Backend, error) {
	if n.Name != "" {
		p.Name = n.Name
	}
	if err := cluster.ValidateName(p.Name); err != nil {
		return nil, fmt.Errorf("cluster nats: %w", err)
	}
	if p.Logger == nil {
		p.Logger = n.logger
	}
	if p.Logger == nil {
		p.Logger = zap.NewNop()
	}
	cfg := n.Config
	key, err := poolKey(&cfg, p)
	if err != nil {
		return nil, err
	}
	v, _, err := pool.LoadOrNew(key, func() (caddy.Destructor, error) {
		return connect(&cfg, p)
	})
	if err != nil {
		return nil, err
	}
	h := &handle{shared: v.(*shared), key: key}
	n.mu.Lock()
	n.opened = append(n.opened, h)
	n.mu.Unlock()
	return h, nil
}

// Cleanup releases the backends this module opened and did not close.
func (n *NATS) Cleanup() error {
	n.mu.Lock()
	hs := n.opened
	n.opened = nil
	n.mu.Unlock()
	for _, h := range hs {
		_ = h.Close()
	}
	return nil
}

// pool holds the connections shared across config reloads.
var pool = caddy.NewUsagePool()

// poolKey identifies a connection by every setting that shapes it.
func poolKey(cfg *Config, p cluster.Params) (string, error) {
	b, err := json.Marshal(struct {
		C *Config
		N string
		L time.Duration
		I time.Duration
		Q *cluster.QueueParams
		K string // the signing keys' fingerprint: {file.…} may change
		V *int   // the cluster level (tests)
	}{cfg, p.Name, p.LockTTL, p.IdempotencyTTL, p.Queue, cfg.keyring.Fingerprint(), cfg.level})
	if err != nil {
		return "", err
	}
	return "hooks.cluster.nats|" + string(b), nil
}

// expand replaces {env.X} and {file.X} placeholders.
func expand(s string) string { return caddy.NewReplacer().ReplaceKnown(s, "") }

// Interface guards
var (
	_ caddy.Provisioner  = (*NATS)(nil)
	_ caddy.CleanerUpper = (*NATS)(nil)
	_ cluster.Engine     = (*NATS)(nil)
	_ cluster.Describer  = (*handle)(nil)
	_ cluster.Redundant  = (*handle)(nil)
)
