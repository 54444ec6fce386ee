// Package adminapi is both sides of the hooks admin API's wire
// (admin.api.hooks, under /hooks/ on Caddy's admin endpoint): the JSON
// shapes its routes answer with and accept, their conversions from and
// to the spool's own types, and the client the `caddy hooks` commands use
// to reach it. The routes themselves are the handler's (caddyhook's
// admin.go); this package knows nothing of the handler.
package adminapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/version"
)

// Prefix is where the routes live on Caddy's admin endpoint.
const Prefix = "/hooks/"

// HandlerStatus is one handler in GET /hooks/.
type HandlerStatus struct {
	Path               string `json:"path"`
	Server             string `json:"server,omitempty"`
	ActiveLockouts     int    `json:"active_lockouts"`
	IdempotencyEntries int    `json:"idempotency_entries"`
	Spool              *Spool `json:"spool"`
	// Settings are limits in force that no request shows directly,
	// read from the state that enforces them (kept across reloads).
	Settings Settings `json:"settings"`
	// Cluster is the cluster engine in use (null without one).
	Cluster *Cluster `json:"cluster,omitempty"`
	// Events is the event log's settings in force (absent with events off).
	Events *Events `json:"events,omitempty"`
}

// Events is a handler's event log settings in force: what it records, and
// the bounds of the log (the oldest config's during a reload, as they
// apply).
type Events struct {
	Bodies        bool     `json:"bodies"`
	MaxBody       int      `json:"max_body"`
	MaxEvents     int      `json:"max_events"`
	MaxBytes      int64    `json:"max_bytes"`
	RetainSeconds float64  `json:"retain_seconds"`
	MaxRejections int      `json:"max_rejections"`
	Dir           string   `json:"dir,omitempty"`
	Headers       []string `json:"headers,omitempty"` // recorded besides the default ones
}

// Settings are a handler's limits in force.
type Settings struct {
	UnauthenticatedBodies        int     `json:"unauthenticated_bodies"`
	UnauthenticatedTimeoutSecond float64 `json:"unauthenticated_body_timeout_seconds"`
	UnauthenticatedPerAddress    int     `json:"unauthenticated_bodies_per_address"`
	// UnauthenticatedPerPrefix are the caps of the IPv6 networks
	// (per_prefix), narrowest first.
	UnauthenticatedPerPrefix []PrefixCap `json:"unauthenticated_bodies_per_prefix,omitempty"`
	LockoutTableSize         int         `json:"lockout_table_size"`
	IdempotencyTTLSeconds    float64     `json:"idempotency_ttl_seconds"`
}

// PrefixCap is the cap of the unauthenticated reads of all the IPv6
// clients of one network of a prefix length.
type PrefixCap struct {
	Bits int `json:"bits"`
	Max  int `json:"max"`
}

// Cluster is the cluster engine of a handler in GET /hooks/: its
// namespace, whether it is reachable, the settings of the connection in
// use (no secret: a secret shows as its placeholder), and its redundancy.
type Cluster struct {
	Name string `json:"name"`
	// Node is this node's name in the cluster (each event's "node").
	Node     string            `json:"node"`
	Up       bool              `json:"up"`
	Settings map[string]string `json:"settings,omitempty"`
	// Degraded: the namespace serves with less redundancy than configured
	// (a stream or bucket with fewer current replicas, or a leader that
	// does not answer): one more failure may cost its quorum. Up stays
	// true meanwhile.
	Degraded bool `json:"degraded"`
	// Streams are the namespace's streams and buckets as this node last
	// read them (at RedundancyRead), Stalled those whose leader did not
	// answer it in time.
	Streams        []ClusterStream `json:"streams,omitempty"`
	Stalled        []string        `json:"stalled,omitempty"`
	RedundancyRead *time.Time      `json:"redundancy_read,omitempty"`
}

// ClusterStream is one stream or bucket of a cluster namespace.
type ClusterStream struct {
	Name     string   `json:"name"`
	Replicas int      `json:"replicas"` // configured
	Current  int      `json:"current"`  // current now, the leader included
	Leader   string   `json:"leader,omitempty"`
	Lagging  []string `json:"lagging,omitempty"` // replicas not current
}

// SetRedundancy fills c's redundancy from r.
func (c *Cluster) SetRedundancy(r cluster.Redundancy) {
	c.Degraded, c.Stalled = r.Degraded(), r.Stalled
	if !r.Read.IsZero() {
		c.RedundancyRead = &r.Read
	}
	c.Streams = make([]ClusterStream, len(r.Streams))
	for i, s := range r.Streams {
		c.Streams[i] = ClusterStream{Name: s.Name, Replicas: s.Replicas, Current: s.Current, Leader: s.Leader, Lagging: s.Lagging}
	}
}

// Spool is a spool's state in GET /hooks/.
type Spool struct {
	Dir              string  `json:"dir,omitempty"`
	Depth            int     `json:"depth"`
	InFlight         int     `json:"in_flight"`
	Bytes            int64   `json:"bytes"`
	MaxBytes         int64   `json:"max_bytes"`
	DeadLetters      int     `json:"dead_letters"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	Paused           bool    `json:"paused"`
	// Delivering: this node delivers to the gateway (with spool cluster,
	// deliver on; a local spool delivers from the config that opened it)
	Delivering bool   `json:"delivering"`
	Rate       string `json:"rate,omitempty"`
	// Error says why the counters are missing (e.g. the cluster queue is
	// unreachable); the rest of the summary is what this node knows.
	Error string `json:"error,omitempty"`
	// the settings in force, which a reload changes
	MaxAgeSeconds       float64 `json:"max_age_seconds"`
	RetryInitialSeconds float64 `json:"retry_initial_seconds"`
	RetryMaxSeconds     float64 `json:"retry_max_seconds"`
	Workers             int     `json:"workers"`
	MaxIdenticalErrors  int     `json:"max_identical_errors,omitempty"`
}

// SpoolOf is the state of the spool in dir, as its operations report it;
// err, when the counters could not be read, is the summary's Error.
func SpoolOf(dir string, s spool.Stats, err error) *Spool {
	sp := &Spool{Dir: dir, Depth: s.Depth, InFlight: s.InFlight, Bytes: s.Bytes,
		MaxBytes: s.MaxBytes, DeadLetters: s.Dead, OldestAgeSeconds: s.OldestAge.Seconds(),
		Paused: s.Paused, Delivering: s.Delivering, Rate: s.Rate.String(), MaxAgeSeconds: s.MaxAge.Seconds(),
		RetryInitialSeconds: s.RetryInitial.Seconds(), RetryMaxSeconds: s.RetryMax.Seconds(), Workers: s.Workers,
		MaxIdenticalErrors: s.MaxIdentical}
	if err != nil {
		sp.Error = err.Error()
	}
	return sp
}

// Stats is s as the spool's operations report it (the counters and the
// rate; the settings stay with the running handler).
func (s *Spool) Stats() spool.Stats {
	rate, _ := spool.ParseRate(s.Rate)
	return spool.Stats{Depth: s.Depth, InFlight: s.InFlight, Dead: s.DeadLetters, Bytes: s.Bytes,
		MaxBytes: s.MaxBytes, OldestAge: time.Duration(s.OldestAgeSeconds * float64(time.Second)),
		Paused: s.Paused, Rate: rate}
}

// Lockout is one entry of GET /hooks/lockouts.
type Lockout struct {
	Address string    `json:"address"`
	Until   time.Time `json:"until"`
}

// DeadLetter is one entry of GET /hooks/spool/dead.
type DeadLetter struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	Path        string    `json:"path"`
	Reason      string    `json:"reason"`
	Attempts    int       `json:"attempts"`
	FirstSeen   time.Time `json:"first_seen"`
	BodyBytes   int       `json:"body_bytes"`
	ClientIP    string    `json:"client_ip,omitempty"`
	TraceParent string    `json:"traceparent,omitempty"`
	// Body is the stored gateway request body (with ?body=1) when it is
	// compact JSON, which it is unless forwarded byte for byte; BodyText
	// holds any other body, so either way the bytes are exact.
	Body     json.RawMessage `json:"body,omitempty"`
	BodyText string          `json:"body_text,omitempty"`
}

// DeadLetterOf is ev as GET /hooks/spool/dead lists it, with its body
// when withBody is set.
func DeadLetterOf(ev *spool.Event, withBody bool) DeadLetter {
	d := DeadLetter{ID: ev.ID, Kind: ev.Kind, Path: ev.Path, Reason: ev.LastError, Attempts: ev.Attempts,
		FirstSeen: ev.FirstSeen.UTC(), BodyBytes: len(ev.Body), ClientIP: ev.ClientIP, TraceParent: ev.TraceParent}
	if withBody {
		var compact bytes.Buffer
		// as JSON when the encoder sends it unchanged (compact JSON), else as text
		if len(ev.Body) > 0 && json.Compact(&compact, ev.Body) == nil && bytes.Equal(compact.Bytes(), ev.Body) {
			d.Body = ev.Body
		} else {
			d.BodyText = string(ev.Body)
		}
	}
	return d
}

// Event is d as the spool's operations list a dead letter.
func (d *DeadLetter) Event() *spool.Event {
	ev := &spool.Event{ID: d.ID, Kind: d.Kind, Path: d.Path, LastError: d.Reason, Attempts: d.Attempts,
		FirstSeen: d.FirstSeen, ClientIP: d.ClientIP, TraceParent: d.TraceParent, Body: []byte(d.BodyText)}
	if d.Body != nil {
		ev.Body = d.Body
	}
	return ev
}

// DeadSelection is the body of a retry or drop request.
type DeadSelection struct {
	IDs []string `json:"ids"`
	All bool     `json:"all"`
}

// Replay is the answer of POST /hooks/events/<id>/replay: the new event
// and how its dispatch went.
type Replay struct {
	ID       string          `json:"id"`
	ReplayOf string          `json:"replay_of"`
	Status   int             `json:"status"`
	OK       bool            `json:"ok"`
	Reason   string          `json:"reason,omitempty"`
	Reply    json.RawMessage `json:"reply,omitempty"`
}

// Version is the answer of GET /hooks/version: the running build's
// release, cluster level and admin API version (the version of this
// wire, also in every answer's version.APIHeader), and the versions of
// the formats it writes and reads.
type Version struct {
	version.Build
	Formats []version.Format `json:"formats"`
}

// VersionOf is the running build's Version.
func VersionOf() Version { return Version{Build: version.Info(), Formats: version.Formats()} }

// ScopeCluster is the value of ?scope= that asks for the whole cluster:
// every node's events, rates and delivery (the others' answers merged
// with this node's); without a cluster engine it is this node alone.
const ScopeCluster = "cluster"

// Nodes says which nodes a cluster-wide answer covers: how many were
// asked (this one included), those that answered, and those that did
// not, each with why ("did not answer within 2s", "runs an older
// release", "not heard from since …"). A node that does not answer in
// time is never waited for.
type Nodes struct {
	Asked    int           `json:"asked"`
	Answered []string      `json:"answered"`
	Missing  []MissingNode `json:"missing,omitempty"`
}

// MissingNode is a node left out of a cluster-wide answer.
type MissingNode struct {
	Node string `json:"node"`
	Why  string `json:"why"`
}

// Summary is n in words: "3 of 3 nodes answered", or which did not.
func (n Nodes) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d nodes answered", len(n.Answered), n.Asked)
	for _, m := range n.Missing {
		fmt.Fprintf(&b, "; %s %s", m.Node, m.Why)
	}
	return b.String()
}

// ClusterPage is GET /hooks/events?scope=cluster: the entries of every
// node merged newest first, each with its "node"; "next" (an RFC 3339
// time) is the next page's before=.
type ClusterPage struct {
	Entries []json.RawMessage `json:"entries"`
	Next    string            `json:"next,omitempty"`
	Nodes   Nodes             `json:"nodes"`
}

// Delivery is GET /hooks/spool/delivery: the queue, each delivery node
// and whether delivery runs (only while some node makes progress).
type Delivery struct {
	Queue   DeliveryQueue           `json:"queue"`
	Nodes   []cluster.NodeDelivery  `json:"nodes"`
	Summary cluster.DeliverySummary `json:"summary"`
	Asked   Nodes                   `json:"asked"`
}

// DeliveryQueue is the queue's side of Delivery.
type DeliveryQueue struct {
	Depth            uint64  `json:"depth"`
	InFlight         uint64  `json:"in_flight"`
	DeadLetters      uint64  `json:"dead_letters"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	AckWaitSeconds   float64 `json:"ack_wait_seconds,omitempty"`
	// Error: the counters could not be read (the rest is what is known).
	Error string `json:"error,omitempty"`
}
