package natscluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
)

// names are the namespace's streams, buckets, subjects and consumers.
type names struct {
	auth, queueWake, queueAgent, dead string // subjects
	queue, deadStream                 string // streams
	locks, idem, lanes                string // buckets
}

func namesFor(name string) names {
	return names{
		auth:       "hooks." + name + ".auth",
		queueWake:  "hooks." + name + ".queue.wake",
		queueAgent: "hooks." + name + ".queue.agent",
		dead:       "hooks." + name + ".dead",
		queue:      "HOOKS_" + name + "_QUEUE",
		deadStream: "HOOKS_" + name + "_DEAD",
		locks:      "hooks_" + name + "_locks",
		idem:       "hooks_" + name + "_idem",
		lanes:      "hooks_" + name + "_lanes",
	}
}

// Consumer names of the delivery lanes.
const (
	consumerWake  = "wake"
	consumerAgent = "agent"
)

// maxAgentsInFlight bounds the agent events delivered and not yet
// acknowledged, across all delivery nodes.
const maxAgentsInFlight = 1024

// shared is one connection and namespace, shared by every handle of the
// same settings.
type shared struct {
	cfg  *Config
	p    cluster.Params
	log  *zap.Logger
	node string
	n    names

	nc *nats.Conn
	js jetstream.JetStream

	ready       atomic.Bool        // streams and buckets provisioned
	connected   atomic.Bool        // the client is connected (read without the client's lock)
	healthy     atomic.Bool        // the last probe or operation was answered in time
	idemStalled atomic.Bool        // an idempotency operation timed out and the bucket's leader has not answered since
	servers     servers            // the servers in use, known and avoided
	redundancy  redundancy         // the replicas last read
	side        side               // a connection to another server, when needed
	silent      atomic.Bool        // the last probe or operation timed out
	grayWait    time.Duration      // (healthLoop's) pause between comparisons with another server,
	grayNext    time.Time          // and the next one
	life        context.Context    // ends when the backend closes
	endLife     context.CancelFunc // …here
	stateMu     sync.Mutex         // orders the reachability changes sent to the hub
	probeNow    chan struct{}
	provisionMu sync.Mutex
	locks, idem atomic.Pointer[kvBox]
	hub         hub
	queue       *queue
	claims      *claims
	closing     chan struct{}
	started     chan struct{} // closed once nc and js are set
	bg          sync.WaitGroup
	rejected    rejections // records dropped: not sealed with the keys
	versions               // the cluster version gate, numbered outcomes, newer records kept (versions.go)
}

type kvBox struct{ jetstream.KeyValue }

// connect opens the connection and provisions the namespace. While no
// server answers it still returns, unprovisioned, and finishes in the
// background on the first connection; an account without JetStream or a
// configuration the server refuses fails it.
func connect(cfg *Config, p cluster.Params) (*shared, error) {
	s := &shared{cfg: cfg, p: p, log: p.Logger.Named("cluster"), node: uuid.NewString()[:8] + "-" + hostname(),
		n: namesFor(p.Name), closing: make(chan struct{}), started: make(chan struct{}), probeNow: make(chan struct{}, 1)}
	s.hub.init()
	s.side.s = s
	s.life, s.endLife = context.WithCancel(context.Background())
	s.initVersions()
	s.claims = &claims{s: s}
	if p.Queue != nil {
		s.queue = newQueue(s)
	}
	opts, err := s.options()
	if err != nil {
		return nil, err
	}
	connected := make(chan struct{}, 1)
	opts = append(opts,
		nats.ReconnectToServer(s.servers.pick(reconnectWait, reconnectJitter)),
		nats.ConnectHandler(func(nc *nats.Conn) {
			<-s.started
			s.servers.connected(nc)
			s.connected.Store(true)
			s.onConnect()
			signal(connected)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			<-s.started
			reason := reasonDisconnected
			if s.servers.connected(nc) {
				reason = reasonStalled
			}
			s.p.Metrics.Reconnected(reason)
			s.silent.Store(false) // (that was the other server)
			s.connected.Store(true)
			s.log.Info("NATS reconnected", zap.String("server", s.nc.ConnectedUrlRedacted()), zap.String("reason", reason))
			s.onConnect()
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			<-s.started
			s.servers.disconnected()
			s.connected.Store(false)
			s.healthy.Store(false) // probed again after the reconnection
			if err != nil || !s.servers.leaving() {
				s.log.Warn("NATS connection lost", zap.Error(err))
			}
			s.refresh()
		}),
		nats.ClosedHandler(func(*nats.Conn) { <-s.started; s.connected.Store(false); s.refresh() }),
	)
	s.nc, err = nats.Connect(strings.Join(mapStrings(cfg.URLs, expand), ","), opts...)
	if err == nil {
		s.js, err = jetstream.New(s.nc)
	}
	if err == nil {
		// the handlers (queued in order, run from here on) keep it current
		s.connected.Store(s.nc.IsConnected())
		s.bg.Add(2)
		go s.healthLoop()
		go s.redundancyLoop()
	}
	close(s.started) // the handlers may use nc and js from here on
	if err != nil {
		if s.nc != nil {
			s.nc.Close()
		}
		return nil, fmt.Errorf("cluster nats: %w", err)
	}
	timeout := time.Duration(cfg.Timeout)
	if s.nc.IsConnected() {
		signal(connected)
	}
	select {
	case <-connected:
	case <-time.After(timeout):
		s.log.Warn("NATS unreachable at start; running on local state until it answers",
			zap.Strings("urls", redactURLs(cfg.URLs)))
		return s, nil
	}
	// Give a cluster that is still electing its leader a few timeouts.
	ctx, cancel := context.WithTimeout(context.Background(), 5*timeout)
	defer cancel()
	if err := s.provisionRetry(ctx); err != nil && !transient(err) {
		s.close()
		return nil, err
	} else if err != nil {
		s.log.Warn("cluster not provisioned yet; retrying in the background", zap.Error(err))
		s.bg.Go(func() { ; s.provisionLoop() })
	}
	return s, nil
}

// The pause between two rounds of reconnection attempts (plus up to the
// jitter).
const (
	reconnectWait   = 250 * time.Millisecond
	reconnectJitter = 100 * time.Millisecond
)

// options builds the client options: endless reconnection, no buffering
// while disconnected (a publish then fails at once and the caller falls
// back), and the configured credentials and TLS.
//
// A server that vanishes without a reset (a partition, a stopped process)
// leaves the socket open: once its buffers are full a write blocks, and
// the client holds its lock meanwhile, so every operation (even asking
// whether it is connected) would wait with it. Writes are therefore
// bounded (half the operation timeout) and a failed write reconnects; the
// pings notice a silent server within a few timeouts.
func (s *shared) options() ([]nats.Option, error) {
	c := s.cfg
	timeout := time.Duration(c.Timeout)
	opts := []nats.Option{
		nats.Name("caddyhook " + s.p.Name + " " + s.node),
		nats.Timeout(timeout),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectJitter(reconnectJitter, 500*time.Millisecond),
		nats.ReconnectBufSize(-1),
		nats.FlusherTimeout(max(timeout/2, 50*time.Millisecond)),
		nats.ReconnectOnFlusherError(),
		nats.PingInterval(max(timeout, 2*time.Second)),
		nats.MaxPingsOutstanding(2),
	}
	switch {
	case c.Credentials != "":
		opts = append(opts, nats.UserCredentials(expand(c.Credentials)))
	case c.User != "":
		opts = append(opts, nats.UserInfo(expand(c.User), expand(c.Password)))
	case c.Token != "":
		opts = append(opts, nats.Token(expand(c.Token)))
	case c.NKey != "":
		o, err := nats.NkeyOptionFromSeed(expand(c.NKey))
		if err != nil {
			return nil, fmt.Errorf("cluster nats: nkey: %w", err)
		}
		opts = append(opts, o)
	}
	if t := c.TLS; t != nil {
		if t.CA != "" {
			opts = append(opts, nats.RootCAs(expand(t.CA)))
		}
		if t.Cert != "" {
			opts = append(opts, nats.ClientCert(expand(t.Cert), expand(t.Key)))
		}
		opts = append(opts, nats.Secure())
	}
	return opts, nil
}

// onConnect provisions on the first connection; on a reconnection it
// probes the namespace before announcing that it is reachable again.
func (s *shared) onConnect() {
	if s.ready.Load() {
		signal(s.probeNow)
		return
	}
	s.provisionInBackground()
}

// provisionInBackground runs provisionLoop unless the backend is closing.
func (s *shared) provisionInBackground() {
	select {
	case <-s.closing:
		return
	default:
	}
	s.bg.Go(func() { ; s.provisionLoop() })
}

// provisionLoop provisions until it succeeds or the backend closes,
// logging each failed attempt.
func (s *shared) provisionLoop() {
	wait := 250 * time.Millisecond
	for !s.ready.Load() {
		err := s.provisionOnce(context.Background())
		if err == nil {
			return
		}
		s.log.Error("cluster provisioning failed; retrying", zap.Error(err))
		select {
		case <-s.closing:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// provisionRetry provisions, retrying transient errors until ctx ends.
func (s *shared) provisionRetry(ctx context.Context) error {
	for {
		err := s.provisionOnce(ctx)
		if err == nil || !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// provisionOnce makes one attempt within the timeout; attempts never overlap.
func (s *shared) provisionOnce(ctx context.Context) error {
	s.provisionMu.Lock()
	defer s.provisionMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.Timeout))
	defer cancel()
	return s.provision(ctx)
}

// errNoJetStream explains the most common refusal.
var errNoJetStream = errors.New("the NATS account has no JetStream: enable it on the server (`jetstream {}` in its config, or `nats-server -js`) and for the account")

// provision creates or updates the buckets, streams and consumers.
func (s *shared) provision(ctx context.Context) error {
	if s.ready.Load() {
		return nil
	}
	if _, err := s.js.AccountInfo(ctx); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return fmt.Errorf("cluster nats: %w", errNoJetStream)
		}
		return fmt.Errorf("cluster nats: jetstream: %w", err)
	}
	r := s.cfg.Replicas
	locks, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: s.n.locks, Description: "caddyhook lockout locks", History: 1,
		TTL: max(s.p.LockTTL, time.Second), Storage: jetstream.FileStorage, Replicas: r,
	})
	if err != nil {
		return fmt.Errorf("cluster nats: bucket %s: %w", s.n.locks, err)
	}
	idem, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: s.n.idem, Description: "caddyhook idempotency claims and replies", History: 1,
		TTL: max(s.p.IdempotencyTTL, time.Second), Storage: jetstream.FileStorage, Replicas: r,
	})
	if err != nil {
		return fmt.Errorf("cluster nats: bucket %s: %w", s.n.idem, err)
	}
	if s.queue != nil {
		if err := s.queue.provision(ctx); err != nil {
			return err
		}
	}
	s.locks.Store(&kvBox{locks})
	s.idem.Store(&kvBox{idem})
	s.healthy.Store(true)
	s.ready.Store(true)
	s.log.Info("cluster ready", zap.String("name", s.p.Name), zap.String("node", s.node),
		zap.Int("replicas", r), zap.String("server", s.nc.ConnectedUrlRedacted()))
	s.refresh()
	return nil
}

// transient reports errors worth retrying: timeouts, no connection, a
// cluster without a leader yet.
func transient(err error) bool {
	if errors.Is(err, errNoJetStream) {
		return false
	}
	if apiErr, ok := errors.AsType[*jetstream.APIError](err); ok {
		return apiErr.Code == 503 || apiErr.Code == 408
	}
	return true
}

// up reports whether the backend can serve now: provisioned, connected
// and answering. It takes no lock of the client, so it never waits for
// the network (the metrics and every request ask it).
func (s *shared) up() bool { return s.ready.Load() && s.connected.Load() && s.healthy.Load() }

// refresh tells the watchers the current reachability (they skip repeats).
func (s *shared) refresh() {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	s.hub.publish(s.up())
}

// close stops the background work and the connection.
func (s *shared) close() {
	select {
	case <-s.closing:
		return
	default:
	}
	close(s.closing)
	s.endLife()
	if s.queue != nil {
		s.queue.setSender(nil, 0)
	}
	if s.nc != nil {
		s.nc.Close()
	}
	s.bg.Wait()
	s.side.close()
	s.hub.close()
}

// Destruct implements caddy.Destructor for the usage pool.
func (s *shared) Destruct() error {
	s.close()
	return nil
}

// handle is one Open's reference to a shared backend.
type handle struct {
	*shared
	key  string
	once sync.Once
}

// Node implements cluster.Backend.
func (h *handle) Node() string { return h.node }

// MaxPayload implements cluster.PayloadLimit: the servers' max_payload
// as the connection learnt it (0 before the first connection).
func (h *handle) MaxPayload() int64 {
	if h.nc == nil {
		return 0
	}
	return h.nc.MaxPayload()
}

// Settings implements cluster.Describer: the settings of the connection
// in use (each reload that changes one opens another connection).
func (h *handle) Settings() map[string]string {
	c := h.cfg
	secret := func(s string) string {
		switch {
		case s == "":
			return ""
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
			return s // a placeholder names where the secret is, not the secret
		}
		return "literal"
	}
	out := map[string]string{
		"urls": strings.Join(redactURLs(c.URLs), " "), "name": h.p.Name, "replicas": strconv.Itoa(c.Replicas),
		"credentials": c.Credentials, "user": c.User, "password": secret(c.Password), "token": secret(c.Token), "nkey": c.NKey,
		"timeout": time.Duration(c.Timeout).String(), "ack_wait": time.Duration(c.AckWait).String(),
		"duplicate_window": time.Duration(c.DuplicateWindow).String(), "clock_skew": time.Duration(c.ClockSkew).String(),
		"accept_unsealed_until": c.AcceptUnsealedUntil,
	}
	keys := make([]string, len(c.SigningKeys))
	for i, k := range c.SigningKeys {
		keys[i] = secret(k)
	}
	out["signing_keys"] = strings.Join(keys, " ")
	if c.TLS != nil {
		out["tls.ca"], out["tls.cert"], out["tls.key"] = c.TLS.CA, c.TLS.Cert, c.TLS.Key
	}
	for k, v := range out {
		if v == "" {
			delete(out, k)
		}
	}
	return out
}

// Name implements cluster.Backend.
func (h *handle) Name() string { return h.p.Name }

// Up implements cluster.Backend.
func (h *handle) Up() bool { return h.up() }

// Timeout implements cluster.Backend.
func (h *handle) Timeout() time.Duration { return time.Duration(h.cfg.Timeout) }

// Watch implements cluster.Backend.
func (h *handle) Watch(fn func(up bool)) func() { return h.hub.watch(fn, h.up()) }

// ClockSkew implements cluster.Backend.
func (h *handle) ClockSkew() time.Duration { return time.Duration(h.cfg.ClockSkew) }

// Claims implements cluster.Backend.
func (h *handle) Claims() cluster.ClaimStore { return h.claims }

// Queue implements cluster.Backend.
func (h *handle) Queue() cluster.QueueStore {
	if h.queue == nil {
		return nil
	}
	return h.queue
}

// Close implements cluster.Backend.
func (h *handle) Close() error {
	h.once.Do(func() { _, _ = pool.Delete(h.key) })
	return nil
}

// signal does a non-blocking send.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func mapStrings(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

// redactURLs drops any user information from server URLs for the log.
func redactURLs(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		if at := strings.LastIndex(u, "@"); at >= 0 {
			if p := strings.Index(u, "://"); p >= 0 && p < at {
				u = u[:p+3] + "[REDACTED]" + u[at:]
			}
		}
		out[i] = u
	}
	return out
}

// bounded runs op and returns when it does or when ctx ends, whichever
// comes first. The client waits for its lock without regard to ctx (a
// write to a silent server holds it up to the flusher timeout, and every
// other write queues behind that one); a request must not wait with it.
// An abandoned op ends in the background, by ctx or by the write timeout.
func bounded[T any](ctx context.Context, op func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := op(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // it did return
			return r.v, r.err
		default:
		}
		var zero T
		return zero, ctx.Err()
	}
}
