package caddyhook

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	_ "github.com/caddyhook/caddyhook/caddyhook/cluster/natscluster" // the nats engine
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/adminapi"
)

// Cluster timings. One idempotency or publish operation is bounded by the
// engine's own timeout (Backend.Timeout).
const (
	// clusterAdminTimeout bounds an admin API operation on the queue.
	clusterAdminTimeout = 4 * time.Second
	// clusterRetryAfter is what a client is told to wait when the cluster
	// cannot take an event (fallback reject) or a duplicate is in flight.
	clusterRetryAfter = 5 * time.Second
	// clusterBusyRetryAfter is the Retry-After of a 409 for a key whose
	// first request is still being dispatched on another node.
	clusterBusyRetryAfter = time.Second
	// clusterDrainRetryMax bounds the fallback spool's wait between two
	// attempts to move its events into the queue once the cluster is back.
	clusterDrainRetryMax = 5 * time.Second
)

// clusterState is a handler's view of its cluster engine.
type clusterState struct {
	backend cluster.Backend
	metrics *cluster.Metrics
	sync    *cluster.LockSync    // shared with the handlers of the same lockout table
	idem    *cluster.Idempotency // cluster-wide idempotency claims
	name    string               // the namespace, for the admin API
	key     string               // engine settings and parameters: tells backends apart
}

// engineKey is what tells backends apart: the engine's settings (raw,
// read before LoadModule clears it), the namespace and the queue's
// settings.
func engineKey(raw json.RawMessage, p cluster.Params) (string, error) {
	k, err := json.Marshal(struct {
		E json.RawMessage
		N string
		Q *cluster.QueueParams
	}{raw, p.Name, p.Queue})
	return string(k), err
}

// openCluster opens the namespace of p on the engine module mod (keyed
// by engineKey), joins the lockout sharing of g, and sets up the
// cluster-wide idempotency claims: a claim's lease and the wait for a
// duplicate's first request (0: the engine's timeout); hm counts the records a newer release wrote.
// Every piece is given back by the handler's
// Cleanup: the LockSync and the metrics through the pool, the backend by
// the engine module's own Cleanup.
func openCluster(ctx caddy.Context, held *poolHold, mod any, key string, p cluster.Params, g *lockoutGuard,
	hm *hookMetrics, lease, wait time.Duration) (*clusterState, error) {
	eng, ok := mod.(cluster.Engine)
	if !ok {
		return nil, fmt.Errorf("cluster: module %T is not a cluster engine", mod)
	}
	ms, _, err := hold(held, clusterMetricsKey, func() (*clusterMetricsShare, error) {
		m, err := cluster.NewMetrics(nil)
		return &clusterMetricsShare{m}, err
	})
	if err != nil {
		return nil, err
	}
	metrics := ms.m
	if err := metrics.Register(ctx.GetMetricsRegistry()); err != nil {
		return nil, fmt.Errorf("cluster metrics: %w", err)
	}
	metrics.SetUnreadable(hm.unreadableRecords())
	p.Metrics = metrics
	b, err := eng.Open(p)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// the node id tells connections apart that settings do not (a signing
	// key read from a file that changed)
	cs := &clusterState{backend: b, metrics: metrics, name: b.Name(), key: key + "|" + b.Node()}
	cs.metrics.Bind(b)
	if cs.sync, err = g.joinCluster(held, b, cs.key, cs.metrics, p.LockTTL); err != nil {
		return nil, err
	}
	if wait <= 0 {
		wait = b.Timeout()
	}
	cs.idem = cluster.NewIdempotency(b.Claims(), cluster.IdempotencyOptions{Lease: lease + 2*b.Timeout(), Wait: wait,
		Timeout: b.Timeout(), Metrics: cs.metrics})
	return cs, nil
}

// clusterMetricsShare is the cluster collectors in the usage pool
// (clusterMetricsKey), so that they keep counting across reloads.
type clusterMetricsShare struct{ m *cluster.Metrics }

// Destruct implements caddy.Destructor.
func (*clusterMetricsShare) Destruct() error { return nil }

// node is this node's id in the cluster.
func (cs *clusterState) node() string { return cs.backend.Node() }

// up reports whether the engine answers this node now.
func (cs *clusterState) up() bool { return cs.backend.Up() }

// views is the engine's cluster view channel (nil: it carries none).
func (cs *clusterState) views() cluster.Views {
	v, _ := cs.backend.(cluster.Views)
	return v
}

// observeDelivery follows the delivery nodes' announcements without
// being one (Start it, Close it): the gate then knows them.
func (cs *clusterState) observeDelivery() *cluster.Members {
	return cluster.ObserveMembers(cs.backend, cluster.TopicDelivery, 0)
}

// gate is the namespace's version gate, which also knows the members.
func (cs *clusterState) gate() *cluster.Gate { return cs.backend.Gate() }

// timeout bounds one engine operation.
func (cs *clusterState) timeout() time.Duration { return cs.backend.Timeout() }

// outcomes is the engine's outcome channel (nil: it carries none).
func (cs *clusterState) outcomes() cluster.Outcomes {
	bus, _ := cs.backend.(cluster.Outcomes)
	return bus
}

// claims are the cluster-wide idempotency claims; nil-safe (nil without
// a cluster engine).
func (cs *clusterState) claims() *cluster.Idempotency {
	if cs == nil {
		return nil
	}
	return cs.idem
}

// queueStore is the engine's replicated queue (nil: it has none).
func (cs *clusterState) queueStore() cluster.QueueStore { return cs.backend.Queue() }

// queueSpool is the engine's queue as a spool, with fallback fb (a local
// spool, or nil).
func (cs *clusterState) queueSpool(fb *spool.Store) (*cluster.Spool, error) {
	return cluster.NewSpool(cs.backend, cluster.SpoolOptions{Fallback: fb, Metrics: cs.metrics})
}

// checkPayload warns when a body as large as limit (the largest body
// limit of the handler: max_body, a mapping's, the gmail allowance) would
// not fit in one message of the engine (NATS's max_payload): such a
// request is refused with 413 (errClusterTooLarge), and the operator
// should raise the servers' max_payload or lower the limits.
func (cs *clusterState) checkPayload(limit int64, logger *zap.Logger) {
	pl, ok := cs.backend.(cluster.PayloadLimit)
	if !ok {
		return
	}
	if msg := payloadWarning(limit, pl.MaxPayload()); msg != "" {
		logger.Warn(msg, zap.Int64("body_limit", limit), zap.Int64("max_payload", pl.MaxPayload()))
	}
}

// clusterEnvelope is what a queued event adds to its body at most: the
// forwarded headers (crossingHeaders' bound), the event's fields and the
// seal.
const clusterEnvelope = maxForwardHeaderBytes + 4<<10

// payloadWarning is checkPayload's message ("" when limit fits in
// maxPayload, or maxPayload is not known).
func payloadWarning(limit, maxPayload int64) string {
	if maxPayload <= 0 || limit+clusterEnvelope <= maxPayload {
		return ""
	}
	return fmt.Sprintf("spool cluster: a body up to the body limit (max_body, a mapping's max_body or the gmail allowance: %d bytes) "+
		"does not fit in one message of the NATS servers (max_payload %d bytes, less about %d for the event's headers): such "+
		"requests are refused with 413; raise max_payload on the servers or lower the limits", limit, maxPayload, clusterEnvelope)
}

// namespace is the namespace's name (the admin API shows it); poolKey
// tells the engine's connections apart in sharedPool.
func (cs *clusterState) namespace() string { return cs.name }
func (cs *clusterState) poolKey() string   { return cs.key }

// status is the cluster's part of the admin API's handler status.
func (cs *clusterState) status() *adminapi.Cluster {
	st := &adminapi.Cluster{Name: cs.name, Node: cs.node(), Up: cs.backend.Up()}
	if d, ok := cs.backend.(cluster.Describer); ok {
		st.Settings = d.Settings()
	}
	if r, ok := cs.backend.(cluster.Redundant); ok {
		st.SetRedundancy(r.Redundancy())
	}
	return st
}
