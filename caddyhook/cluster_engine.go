package caddyhook

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	_ "github.com/caddyhook/caddyhook/caddyhook/cluster/natscluster" // the nats engine
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

// clusterParams are the engine parameters of h: its namespace (from the
// base path unless the engine sets one), the longest lock, the
// idempotency TTL and, with `spool cluster`, the queue's settings.
func (h *Handler) clusterParams() cluster.Params {
	p := cluster.Params{
		Name:           cluster.NameFromPath(h.base),
		LockTTL:        time.Duration(h.AuthFailures.Window) + h.lockout.Policy().LockFor,
		IdempotencyTTL: time.Duration(h.IdempotencyTTL),
		Logger:         h.logger.Named("cluster"),
	}
	if sc := h.Spool; sc != nil && sc.Cluster {
		p.Queue = &cluster.QueueParams{MaxBytes: sc.MaxBytes, MaxAge: time.Duration(sc.MaxAge),
			RetryInitial: time.Duration(sc.RetryInitial), RetryMax: time.Duration(sc.RetryMax)}
	}
	return p
}

// provisionCluster loads the cluster engine, opens this handler's
// namespace and joins the shared lockout. Every piece is given back by
// Cleanup: the LockSync through the pool, the backend by the engine
// module's own Cleanup.
func (h *Handler) provisionCluster(ctx caddy.Context) error {
	if h.ClusterRaw == nil {
		return nil
	}
	p := h.clusterParams()
	// the engine's settings tell backends apart (LoadModule clears ClusterRaw)
	engineKey, err := json.Marshal(struct {
		E json.RawMessage
		N string
		Q *cluster.QueueParams
	}{h.ClusterRaw, p.Name, p.Queue})
	if err != nil {
		return err
	}
	mod, err := ctx.LoadModule(h, "ClusterRaw")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	eng, ok := mod.(cluster.Engine)
	if !ok {
		return fmt.Errorf("cluster: module %T is not a cluster engine", mod)
	}
	ms, _, err := hold(&h.held, clusterMetricsKey, func() (*clusterMetricsShare, error) {
		m, err := cluster.NewMetrics(nil)
		return &clusterMetricsShare{m}, err
	})
	if err != nil {
		return err
	}
	metrics := ms.m
	if err := metrics.Register(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("cluster metrics: %w", err)
	}
	p.Metrics = metrics
	b, err := eng.Open(p)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	// the node id tells connections apart that settings do not (a signing
	// key read from a file that changed)
	cs := &clusterState{backend: b, metrics: metrics, name: b.Name(), key: string(engineKey) + "|" + b.Node()}
	h.cluster = cs
	cs.metrics.Bind(b)

	if cs.sync, err = h.lockout.joinCluster(&h.held, b, cs.key, cs.metrics, p.LockTTL); err != nil {
		return err
	}

	wait := time.Duration(h.GatewayTimeout)
	lease := time.Duration(h.GatewayWaitTimeout) + 2*b.Timeout()
	if h.Spool != nil {
		lease = time.Duration(h.GatewayTimeout) + 2*b.Timeout()
	}
	cs.idem = cluster.NewIdempotency(b.Claims(), cluster.IdempotencyOptions{Lease: lease, Wait: wait,
		Timeout: b.Timeout(), Metrics: cs.metrics})
	return nil
}

// clusterMetricsShare is the cluster collectors in the usage pool
// (clusterMetricsKey), so that they keep counting across reloads.
type clusterMetricsShare struct{ m *cluster.Metrics }

// Destruct implements caddy.Destructor.
func (*clusterMetricsShare) Destruct() error { return nil }

// status is the cluster's part of the admin API's handler status.
func (cs *clusterState) status() *adminapi.Cluster {
	st := &adminapi.Cluster{Name: cs.name, Up: cs.backend.Up()}
	if d, ok := cs.backend.(cluster.Describer); ok {
		st.Settings = d.Settings()
	}
	return st
}
