package natscluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// A server alive but stalled (its disk hung, its store frozen) still
// answers the client's PINGs, so the connection stays up, while the
// JetStream requests that need it wait. The health probe notices the
// silence; the side connection, to another server, tells a stalled server
// (the other one answers the same probe: the node reconnects there and
// avoids the silent one for a while) from a stalled stream (no server
// answers: moving gains nothing). The side connection also reads an
// idempotency key when a read through the main connection is slow or
// stale (claims.go).

// Reconnection reasons, the values of caddy_hooks_cluster_reconnects_total's
// reason label.
const (
	reasonStalled      = "stalled"      // this node left a server that stopped answering JetStream
	reasonDisconnected = "disconnected" // the connection broke and the client reconnected
)

const (
	// avoidFor is how long a server the node left as stalled is not
	// chosen again (unless no other is left).
	avoidFor = 30 * time.Second
	// sideIdle closes a side connection unused this long.
	sideIdle = time.Minute
	// grayBackoffMax bounds the pause between two comparisons with
	// another server while the probe keeps failing everywhere (a stream
	// without a leader, a cluster without quorum).
	grayBackoffMax = 30 * time.Second
)

// servers remembers the servers of the main connection: the one in use,
// the ones known, and the ones to avoid. It is updated from the client's
// handlers, so that the request path never takes the client's lock (a
// write to a silent server holds it).
type servers struct {
	mu      sync.Mutex
	current string               // URL of the server in use ("" while disconnected)
	name    string               // its server name
	known   []string             // every server URL the client knows
	avoid   map[string]time.Time // URL → until when a reconnection skips it
	picks   int                  // reconnection attempts since the last connection
	forced  bool                 // the next reconnection is one this node asked for
}

// connected records the server in use after a (re)connection; it reports
// whether this node had asked for it (a stalled server left).
func (v *servers) connected(nc *nats.Conn) (forced bool) {
	cur, name, known := nc.ConnectedUrl(), nc.ConnectedServerName(), nc.Servers()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.current, v.name, v.known, v.picks = cur, name, known, 0
	forced, v.forced = v.forced, false
	return forced
}

// leaving reports whether the node is leaving its server on purpose.
func (v *servers) leaving() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.forced
}

// disconnected records that no server is in use.
func (v *servers) disconnected() {
	v.mu.Lock()
	v.current, v.name = "", ""
	v.mu.Unlock()
}

// nameInUse is the name of the server in use ("" while disconnected).
func (v *servers) nameInUse() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.name
}

// leave marks the server in use to be avoided until until, and the next
// reconnection as asked for; it returns that server ("" if none).
func (v *servers) leave(until time.Time) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.current == "" {
		return ""
	}
	if v.avoid == nil {
		v.avoid = make(map[string]time.Time)
	}
	v.avoid[v.current] = until
	v.forced = true
	return v.current
}

// others are the known servers but the one in use and those to avoid.
func (v *servers) others() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	now := time.Now()
	for _, u := range v.known {
		if u != v.current && !now.Before(v.avoid[u]) {
			out = append(out, u)
		}
	}
	return out
}

// inUse is the server in use ("" while disconnected).
func (v *servers) inUse() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.current
}

// pick is the client's reconnection choice (nats.ReconnectToServer): the
// servers in turn, those to avoid skipped while another is left, with the
// client's usual pause (wait plus jitter) after each round.
func (v *servers) pick(wait, jitter time.Duration) nats.ReconnectToServerHandler {
	return func(pool []nats.Server, _ nats.ServerInfo) (*nats.Server, time.Duration) {
		v.mu.Lock()
		defer v.mu.Unlock()
		now := time.Now()
		var ok []int
		for i, sv := range pool {
			if sv.URL != nil && !now.Before(v.avoid[sv.URL.String()]) {
				ok = append(ok, i)
			}
		}
		if len(ok) == 0 { // every server is avoided: try them all
			for i := range pool {
				ok = append(ok, i)
			}
		}
		if len(ok) == 0 {
			return nil, 0
		}
		n := v.picks
		v.picks++
		var delay time.Duration
		if n > 0 && n%len(ok) == 0 { // a whole round failed
			delay = wait + rand.N(jitter+1)
		}
		return &pool[ok[n%len(ok)]], delay
	}
}

// side is a second connection, to another server than the main one's,
// opened when needed and closed when idle.
type side struct {
	s    *shared
	mu   sync.Mutex
	nc   *nats.Conn
	url  string
	used time.Time
}

// conn returns the side connection, to a server other than the one the
// main connection uses, connecting within ctx when there is none.
func (d *side) conn(ctx context.Context) (*nats.Conn, error) {
	main := d.s.servers.inUse()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nc != nil && d.nc.IsConnected() && d.url != main {
		d.used = time.Now()
		return d.nc, nil
	}
	d.closeLocked()
	others := d.s.servers.others()
	if len(others) == 0 {
		return nil, errors.New("no other NATS server known (or all avoided)")
	}
	opts, err := d.s.options()
	if err != nil {
		return nil, err
	}
	var last error
	for _, u := range others {
		left := time.Until(deadlineOr(ctx, time.Now().Add(time.Duration(d.s.cfg.Timeout))))
		if left <= 0 {
			break
		}
		nc, err := nats.Connect(u, append(opts, nats.Name("caddyhook "+d.s.p.Name+" "+d.s.node+" side"),
			nats.Timeout(left), nats.RetryOnFailedConnect(false), nats.NoReconnect())...)
		if err != nil {
			last = err
			continue
		}
		d.nc, d.url, d.used = nc, u, time.Now()
		return nc, nil
	}
	if last == nil {
		last = ctx.Err()
	}
	return nil, fmt.Errorf("no other NATS server answers: %w", last)
}

// closeIdle closes the side connection once unused for sideIdle.
func (d *side) closeIdle() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.nc != nil && time.Since(d.used) > sideIdle {
		d.closeLocked()
	}
}

func (d *side) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeLocked()
}

func (d *side) closeLocked() {
	if d.nc != nil {
		d.nc.Close()
		d.nc, d.url = nil, ""
	}
}

// deadlineOr is ctx's deadline, or def without one.
func deadlineOr(ctx context.Context, def time.Time) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return def
}

// sideProbe asks another server what the health probe asks (the state of
// the namespace's main stream), within one timeout.
func (s *shared) sideProbe() error {
	ctx, cancel := context.WithTimeout(s.life, time.Duration(s.cfg.Timeout))
	defer cancel()
	nc, err := s.side.conn(ctx)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = bounded(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, s.probeStream()) })
	return err
}

// checkGray runs after a probe through the main connection timed out
// while it stays connected, with the answer of another server to the same
// probe, asked at the same moment (a stream without a leader, an election
// under way, times out the probe everywhere until the election ends: a
// comparison with an earlier probe could take the server in use for
// stalled). When the other server answered, the one in use is stalled,
// and the node reconnects elsewhere. Otherwise (a stream's leader stalled,
// a cluster without quorum: no server answers) the next comparison waits,
// longer each time, until the probe answers.
func (s *shared) checkGray(probeErr, sideErr error) {
	if sideErr != nil {
		s.grayWait = min(max(2*s.grayWait, time.Duration(s.cfg.Timeout)), grayBackoffMax)
		s.grayNext = time.Now().Add(s.grayWait)
		s.log.Debug("no other NATS server answers either: not leaving this one", zap.NamedError("here", probeErr), zap.NamedError("there", sideErr))
		return
	}
	s.grayWait, s.grayNext = 0, time.Time{}
	s.leave("NATS server stopped answering JetStream while its connection stays up; reconnecting to another server", zap.Error(probeErr))
}

// checkLagging runs when the leaders of the namespace's streams report
// the server in use as a replica that stopped following (not current,
// silent for stalledAfter): its store stalled, and it will soon hold up
// the requests it forwards too. The node leaves it while it still
// answers, once another server takes a connection.
func (s *shared) checkLagging(stream string, silent time.Duration) {
	ctx, cancel := context.WithTimeout(s.life, time.Duration(s.cfg.Timeout))
	defer cancel()
	if _, err := s.side.conn(ctx); err != nil {
		s.log.Debug("the NATS server in use stopped following its streams, and no other one takes a connection", zap.Error(err))
		return
	}
	s.leave("NATS server in use stopped following its streams (its store stalls); reconnecting to another server",
		zap.String("stream", stream), zap.Duration("silent_for", silent))
}

// stalledAfter is how long a replica may stay silent before the server
// holding it counts as stalled.
func (s *shared) stalledAfter() time.Duration {
	return max(time.Duration(s.cfg.Timeout), 2*time.Second)
}

// leave reconnects to another server, avoiding the one in use for a while.
func (s *shared) leave(why string, fields ...zap.Field) {
	left := s.servers.leave(time.Now().Add(avoidFor))
	if left == "" {
		return
	}
	s.log.Warn(why, append([]zap.Field{zap.String("server", redactURL(left)), zap.Duration("avoided_for", avoidFor)}, fields...)...)
	if err := s.nc.ForceReconnect(); err != nil {
		s.log.Warn("NATS reconnection failed", zap.Error(err))
	}
}

// redactURL drops any user information from one server URL.
func redactURL(u string) string { return redactURLs([]string{u})[0] }

// directGet reads the last record of subject in stream through nc: a
// direct get, which any replica answers (the stream's leader is not
// needed), as the KV's own Get does through the main connection.
func directGet(ctx context.Context, nc *nats.Conn, stream, key, subject string) (entry, error) {
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream+"."+subject, nil)
	if err != nil {
		return entry{}, err
	}
	switch m.Header.Get("Status") {
	case "":
	case "404":
		return entry{}, jetstream.ErrKeyNotFound
	default:
		return entry{}, fmt.Errorf("direct get %s: status %s %s", subject, m.Header.Get("Status"), m.Header.Get("Description"))
	}
	if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return entry{}, jetstream.ErrKeyDeleted
	}
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return entry{}, fmt.Errorf("direct get %s: sequence: %w", subject, err)
	}
	created, err := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return entry{}, fmt.Errorf("direct get %s: time: %w", subject, err)
	}
	return entry{key: key, value: m.Data, rev: seq, created: created}, nil
}

// entry is a bucket record read through the side connection.
type entry struct {
	key     string
	value   []byte
	rev     uint64
	created time.Time
}

func (e entry) Key() string        { return e.key }
func (e entry) Value() []byte      { return e.value }
func (e entry) Revision() uint64   { return e.rev }
func (e entry) Created() time.Time { return e.created }

// kvEntry is what the claims read of a record: a KV entry, or one read
// through the side connection.
type kvEntry interface {
	Key() string
	Value() []byte
	Revision() uint64
	Created() time.Time
}
