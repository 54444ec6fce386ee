package natscluster

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/secret"
)

// The trust model: NATS is shared infrastructure, not a trusted peer.
// Nodes authenticate to it (warned about when they do not), seal every
// record they write with the cluster's signing key and drop, count and
// log every record they read that does not open (see cluster.Keyring);
// the times in what does open are clamped by the readers (cluster.LockSync,
// claims, queue).

// Seal contexts: what a record is, besides its subject or key.
const (
	sealQueue    = "queue"
	sealDead     = "dead_letter"
	sealIdem     = "idempotency"
	sealLock     = "lock"
	sealFailures = "failures"
	sealMembers  = "members"
	sealLease    = "lease"
	sealOutcome  = "outcome"
	// the cluster view: a request (for its subject), an answer (for the
	// request's reply inbox), a tail batch (for the asker's inbox)
	sealView       = "view"
	sealViewAnswer = "view_answer"
	sealViewTail   = "view_tail"
)

// signingKeyExample is how the README and the errors suggest setting the key.
const signingKeyExample = "signing_key {env.HOOKS_CLUSTER_KEY}, with HOOKS_CLUSTER_KEY=$(openssl rand -hex 32) the same on every node"

// validateTrust expands and checks the secrets, builds the keyring and
// fills the clock skew's default; errors name the field, never a value.
func (n *Config) validateTrust() error {
	switch {
	case n.ClockSkew < 0 || time.Duration(n.ClockSkew) > cluster.MaxClockSkew:
		return fmt.Errorf("cluster nats: clock_skew: %s must be between 0 and %s", time.Duration(n.ClockSkew), cluster.MaxClockSkew)
	case n.ClockSkew == 0:
		n.ClockSkew = caddy.Duration(cluster.DefaultClockSkew)
	}
	// (an empty user, password, token, credentials or nkey: see validate)
	if len(n.SigningKeys) == 0 {
		return fmt.Errorf("cluster nats: signing_key: required: a secret the nodes seal what they write to NATS with, so that none of them trusts a record that another client of the servers wrote (set it, e.g. %s)", signingKeyExample)
	}
	keys := make([]string, len(n.SigningKeys))
	for i, raw := range n.SigningKeys {
		if keys[i] = strings.TrimSpace(expand(raw)); keys[i] == "" {
			field := "signing_key"
			if len(n.SigningKeys) > 1 {
				field = fmt.Sprintf("signing_key %d of %d", i+1, len(n.SigningKeys))
			}
			return fmt.Errorf("cluster nats: %s: %s", field, secret.Empty(raw, signingKeyExample))
		}
	}
	kr, err := cluster.NewKeyring(keys)
	if err != nil {
		return fmt.Errorf("cluster nats: signing_key: %w", err)
	}
	n.keyring = kr
	return n.validateUnsealed(time.Now())
}

// maxUnsealedWindow bounds accept_unsealed_until: while it lasts, any
// client of the servers can write records the node trusts, as before
// signing_key.
const maxUnsealedWindow = 30 * 24 * time.Hour

// validateUnsealed parses accept_unsealed_until (empty: off).
func (n *Config) validateUnsealed(now time.Time) error {
	n.unsealedUntil = time.Time{}
	if n.AcceptUnsealedUntil == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, expand(n.AcceptUnsealedUntil))
	if err != nil {
		return fmt.Errorf("cluster nats: accept_unsealed_until: want an RFC 3339 time such as %s: %v",
			now.Add(72*time.Hour).UTC().Format(time.RFC3339), err)
	}
	if t.After(now.Add(maxUnsealedWindow)) {
		return fmt.Errorf("cluster nats: accept_unsealed_until: %s is more than %d days ahead; while it lasts any client of the NATS servers can write records the nodes trust",
			t.Format(time.RFC3339), int(maxUnsealedWindow/(24*time.Hour)))
	}
	n.unsealedUntil = t
	return nil
}

// warn logs what provisioning accepts but an operator should change: a
// connection that presents no credentials, and secrets written as literals.
func (n *Config) warn(logger *zap.Logger) {
	if !n.authenticated() {
		logger.Warn("cluster nats: the NATS connection presents no credentials (credentials, user/password, token, nkey or a tls client cert): "+
			"any client that reaches the servers can read the queued events and delete or flood the cluster's streams and buckets "+
			"(records it writes are dropped: they are not sealed with signing_key); give the servers authorization and the nodes credentials",
			zap.String("block", "cluster nats"), zap.Strings("urls", redactURLs(n.URLs)))
	}
	for _, f := range []struct{ name, raw string }{{"cluster nats: password", n.Password}, {"cluster nats: token", n.Token}} {
		if secret.IsLiteral(f.raw) {
			logger.Warn(secret.LiteralWarning, zap.String("field", f.name))
		}
	}
	for i, raw := range n.SigningKeys {
		if secret.IsLiteral(raw) {
			logger.Warn(secret.LiteralWarning, zap.String("field", fmt.Sprintf("cluster nats: signing_key %d", i+1)))
		}
	}
	switch until := n.unsealedUntil; {
	case until.IsZero():
	case time.Now().Before(until):
		logger.Warn("cluster nats: accept_unsealed_until: until then this node reads the unsealed queued events, dead letters and idempotency records "+
			"of a release without signing_key, which any client of the NATS servers could write; remove it once the migration is done",
			zap.Time("until", until))
	default:
		logger.Info("cluster nats: accept_unsealed_until has passed: unsealed records are refused; the option can go", zap.Time("until", until))
	}
}

// SecretFields implements cluster.Secrets: the credentials, the files
// that hold them and the signing keys, named as validate names them.
func (n *Config) SecretFields() []cluster.SecretField {
	out := []cluster.SecretField{{Name: "cluster nats: user", Raw: n.User}, {Name: "cluster nats: password", Raw: n.Password},
		{Name: "cluster nats: token", Raw: n.Token}, {Name: "cluster nats: credentials", Raw: n.Credentials},
		{Name: "cluster nats: nkey", Raw: n.NKey}}
	for i, raw := range n.SigningKeys {
		field := "cluster nats: signing_key"
		if len(n.SigningKeys) > 1 {
			field = fmt.Sprintf("cluster nats: signing_key %d of %d", i+1, len(n.SigningKeys))
		}
		out = append(out, cluster.SecretField{Name: field, Raw: raw})
	}
	if t := n.TLS; t != nil {
		out = append(out, cluster.SecretField{Name: "cluster nats: tls ca", Raw: t.CA, Each: true},
			cluster.SecretField{Name: "cluster nats: tls cert", Raw: t.Cert, Each: true},
			cluster.SecretField{Name: "cluster nats: tls key", Raw: t.Key, Each: true})
	}
	return out
}

// Interface guard
var _ cluster.Secrets = (*Config)(nil)

// authenticated reports whether the connection presents credentials of
// any kind: a creds file, user/password (also in a URL), a token, an nkey
// or a TLS client certificate.
func (n *Config) authenticated() bool {
	if n.Credentials != "" || n.User != "" || n.Token != "" || n.NKey != "" || (n.TLS != nil && n.TLS.Cert != "") {
		return true
	}
	for _, u := range n.URLs {
		if _, after, ok := strings.Cut(u, "://"); ok && strings.Contains(after, "@") {
			return true
		}
	}
	return false
}

// rejectLogEvery bounds the log lines about dropped records: a flood of
// forged records logs one line per interval, with the count since.
const rejectLogEvery = 10 * time.Second

// rejections counts and logs the records a node dropped.
type rejections struct {
	mu         sync.Mutex
	last       time.Time
	suppressed uint64
}

// reject drops one record of kind that did not open: counted on the
// metrics, logged within the budget (where it was, never its content).
func (s *shared) reject(kind string, where ...zap.Field) {
	s.p.Metrics.Rejected(kind)
	r := &s.rejected
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.last) < rejectLogEvery {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	suppressed := r.suppressed
	r.last, r.suppressed = now, 0
	r.mu.Unlock()
	s.log.Warn("cluster: dropped a record not sealed with the cluster's signing key (written by a client that is not a node of this cluster, or by a node with other keys)",
		append(where, zap.String("kind", kind), zap.Uint64("suppressed", suppressed))...)
}

// seal appends the seal of a payload of kind written to the subject, or
// bucket and key, where.
func (s *shared) seal(payload []byte, kind string, where ...string) []byte {
	var ctx [3]string
	return s.cfg.keyring.Seal(payload, sealContext(&ctx, kind, where)...)
}

// open opens a record of kind read from where.
func (s *shared) open(sealed []byte, kind string, where ...string) ([]byte, bool) {
	var ctx [3]string
	return s.cfg.keyring.Open(sealed, sealContext(&ctx, kind, where)...)
}

// sealContext is kind followed by where (at most two parts), in buf.
func sealContext(buf *[3]string, kind string, where []string) []string {
	buf[0] = kind
	return buf[:1+copy(buf[1:], where)]
}
