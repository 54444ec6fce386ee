package caddyhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/eventlog"
)

// The cluster view (issue 32): from any node, the event list, one
// event, the rates, the delivery health and the live tail of every node
// of the cluster. The engine carries requests to every node and their
// answers back (cluster.Views); this node asks, waits at most
// viewWait for the answers, merges them with its own part and names every
// node that did not answer, and why. It answers the others' requests
// from its own event log and delivery. Nothing of it is on the request
// path: it costs while someone looks.

// Cluster view timings.
const (
	// viewWait bounds the wait for the other nodes' answers (at most the
	// engine's timeout).
	viewWait = 2 * time.Second
	// tailLease is how long a node follows a live tail without a
	// renewal; tailRenew how often the follower renews it (and learns
	// which nodes answer).
	tailLease = 10 * time.Second
	tailRenew = 2 * time.Second
	// maxRemoteTails bounds the live tails a node follows for others.
	maxRemoteTails = 8
	// maxDeliveryMemory bounds the delivery nodes remembered.
	maxDeliveryMemory = 256
)

// clusterView is a handler's cluster-wide view: its node, the engine's
// view channel, this node's event log and delivery (what it answers
// with), what it last heard of each delivery node, and the live tails it
// follows for other nodes.
type clusterView struct {
	node    string        // this node ("" without a cluster engine)
	views   cluster.Views // nil: no cluster, or an engine without the view
	gate    *cluster.Gate
	wait    time.Duration
	base    string
	events  *eventRecorder // nil: events off
	report  deliveryReport // nil: no spool
	logger  *zap.Logger
	stop    func()
	stopped chan struct{}
	// delivering follows the delivery nodes' announcements (this node
	// need not be one), so that the gate knows them, and those that fell
	// silent
	delivering *cluster.Members

	mu     sync.Mutex
	memory map[string]*deliveryMemo // delivery nodes, by node
	tails  map[string]*remoteTail   // the tails followed for others, by inbox
	tailWG sync.WaitGroup
}

// deliveryMemo is what was last heard of a delivery node.
type deliveryMemo struct {
	facts cluster.DeliveryFacts
	heard time.Time
}

// newClusterView builds the view of a handler; with a cluster engine that
// carries the view it answers the other nodes until release.
func newClusterView(cs *clusterState, events *eventRecorder, report deliveryReport, base string, logger *zap.Logger) (*clusterView, error) {
	v := &clusterView{base: base, events: events, report: report, logger: logger.Named("view"), wait: viewWait,
		memory: map[string]*deliveryMemo{}, tails: map[string]*remoteTail{}, stopped: make(chan struct{})}
	if cs == nil {
		return v, nil
	}
	v.node, v.gate, v.wait = cs.node(), cs.gate(), min(viewWait, max(cs.timeout(), 250*time.Millisecond))
	if v.views = cs.views(); v.views == nil {
		return v, nil
	}
	stop, err := v.views.ServeView(v.answer)
	if err != nil {
		return nil, fmt.Errorf("cluster: view: %w", err)
	}
	v.stop = stop
	v.delivering = cs.observeDelivery()
	if err := v.delivering.Start(); err != nil {
		v.release()
		return nil, fmt.Errorf("cluster: view: %w", err)
	}
	return v, nil
}

// release stops answering and ends the tails followed for others; nil-safe.
func (v *clusterView) release() {
	if v == nil {
		return
	}
	if v.stop != nil {
		v.stop()
		v.stop = nil
	}
	if v.delivering != nil {
		v.delivering.Close()
		v.delivering = nil
	}
	v.mu.Lock()
	select {
	case <-v.stopped:
	default:
		close(v.stopped)
	}
	v.mu.Unlock()
	v.tailWG.Wait()
}

// nodeName is this node's name ("" without a cluster engine).
func (v *clusterView) nodeName() string { return v.node }

// log is this node's event log (nil: events off).
func (v *clusterView) log() *eventlog.Log {
	if v.events == nil {
		return nil
	}
	return v.events.eventLog()
}

// ---- answering the other nodes ----

// answer is this node's part of another node's request.
func (v *clusterView) answer(q cluster.ViewRequest) cluster.ViewAnswer {
	a := cluster.ViewAnswer{Path: v.base}
	if q.Op == cluster.ViewHealth {
		if v.report != nil {
			a.Health = v.report.facts(time.Now())
		}
		return a
	}
	l := v.log()
	if l == nil {
		a.Error = "its event log is off (events off)"
		return a
	}
	switch q.Op {
	case cluster.ViewList:
		f, err := eventlog.ParseFilter(queryValues(q.Query), time.Now())
		if err != nil {
			a.Error = err.Error()
			return a
		}
		a.Page = v.localPage(l, f)
	case cluster.ViewDetail:
		if ev, _, ok := l.Get(q.Event); ok {
			ev.Node = v.node
			if ev.Body != nil && len(*ev.Body) > cluster.MaxViewBody {
				ev.BodyNote = fmt.Sprintf("the cluster view carries the first %d bytes; open it on %s for the rest", cluster.MaxViewBody, v.node)
			}
			if b, _ := json.Marshal(ev); len(b) > cluster.ViewAnswerBudget {
				// escaped, it would not fit in one answer
				ev.Body, ev.BodyNote = nil, fmt.Sprintf("too large for the cluster view; open it on %s", v.node)
			}
			a.Event = &ev
		}
	case cluster.ViewRates:
		r := l.Rates(time.Now())
		a.Rates = &r
	case cluster.ViewTail:
		f, err := eventlog.ParseFilter(queryValues(q.Query), time.Now())
		if err != nil {
			a.Error = err.Error()
			return a
		}
		if err := v.follow(l, q.Inbox, f, q.Until); err != nil {
			a.Error = err.Error()
			return a
		}
		a.Tail = true
	}
	return a
}

// queryValues converts a request's query.
func queryValues(m map[string]string) url.Values {
	q := url.Values{}
	for k, val := range m {
		q.Set(k, val)
	}
	return q
}

// localPage is this node's page of the list f selects, each entry with
// this node's name, within what one answer carries.
func (v *clusterView) localPage(l *eventlog.Log, f eventlog.Filter) *cluster.ViewPage {
	p := &cluster.ViewPage{Entries: []cluster.ViewEntry{}}
	if f.Node != "" && f.Node != v.node {
		return p
	}
	page := l.List(f)
	size := 0
	for _, en := range page.Entries {
		e := v.entry(en)
		b, _ := json.Marshal(e)
		if size += len(b); size > cluster.ViewAnswerBudget {
			p.More = true
			return p
		}
		p.Entries = append(p.Entries, e)
	}
	p.More = page.Next != ""
	return p
}

// entry is a list entry (EventJSON or RejectionJSON) of this node.
func (v *clusterView) entry(en any) cluster.ViewEntry {
	switch e := en.(type) {
	case eventlog.EventJSON:
		e.Node = v.node
		return cluster.ViewEntry{Event: &e}
	case eventlog.RejectionJSON:
		e.Node = v.node
		return cluster.ViewEntry{Rows: &e}
	}
	return cluster.ViewEntry{}
}

// remoteTail is a live tail this node follows for another node: what
// changes in its log goes to inbox until the lease runs out.
type remoteTail struct {
	inbox string
	mu    sync.Mutex
	until time.Time
}

// follow starts (or renews) the tail of inbox until until.
func (v *clusterView) follow(l *eventlog.Log, inbox string, f eventlog.Filter, until time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-v.stopped:
		return fmt.Errorf("the handler is stopping")
	default:
	}
	if t := v.tails[inbox]; t != nil {
		t.mu.Lock()
		t.until = until
		t.mu.Unlock()
		return nil
	}
	if len(v.tails) >= maxRemoteTails {
		return fmt.Errorf("it follows %d live tails already", maxRemoteTails)
	}
	t := &remoteTail{inbox: inbox, until: until}
	v.tails[inbox] = t
	v.tailWG.Add(1)
	go v.runTail(l, t, f)
	return nil
}

// runTail sends the changes of l that f selects to t's inbox until its
// lease ends or the handler stops; the last batch says it is done.
func (v *clusterView) runTail(l *eventlog.Log, t *remoteTail, f eventlog.Filter) {
	defer v.tailWG.Done()
	sub := l.Subscribe()
	defer sub.Close()
	defer func() {
		v.mu.Lock()
		delete(v.tails, t.inbox)
		v.mu.Unlock()
	}()
	other := f.Node != "" && f.Node != v.node // the filter asks for another node: nothing of this one
	f.Before, f.Limit = 0, 0
	var n uint64
	send := func(b cluster.TailBatch) bool {
		n++
		b.Inbox, b.Node, b.N, b.Time = t.inbox, v.node, n, time.Now()
		if err := v.views.SendTail(b); err != nil {
			v.logger.Debug("cluster view: tail batch not sent", zap.Error(err))
			return false
		}
		return true
	}
	var lastRows time.Time
	var budget tailBudget
	tick := time.NewTicker(streamRowsEvery)
	defer tick.Stop()
	for {
		now := time.Now()
		t.mu.Lock()
		until := t.until
		t.mu.Unlock()
		if now.After(until) {
			send(cluster.TailBatch{Done: true})
			return
		}
		rows := now.Sub(lastRows) >= streamRowsEvery
		if rows {
			lastRows = now
		}
		skipped := budget.report(now)
		c := sub.NextAtMost(f, rows, budget.take(now))
		if other {
			c = eventlog.Changes{}
		}
		budget.spent(len(c.Events)+len(c.Rows), c.Skipped)
		entries := make([]cluster.ViewEntry, 0, len(c.Events)+len(c.Rows))
		for i := range c.Events {
			entries = append(entries, v.entry(c.Events[i]))
		}
		for i := range c.Rows {
			entries = append(entries, v.entry(c.Rows[i]))
		}
		lost := c.Lost
		for len(entries) > 0 || lost || skipped > 0 {
			k := min(len(entries), 64)
			send(cluster.TailBatch{Lost: lost, Skipped: skipped, Entries: entries[:k]})
			entries, lost, skipped = entries[k:], false, 0
		}
		select {
		case <-v.stopped:
			send(cluster.TailBatch{Done: true})
			return
		case <-sub.Changed():
		case <-tick.C:
		}
	}
}

// ---- asking the other nodes ----

// ask sends q to every other node and calls fn with each answer (one per
// node, from one goroutine) until every live node that can answer did,
// fn says it is done, or the wait is over; it says which nodes answered
// (this one first) and which did not, and why.
func (v *clusterView) ask(ctx context.Context, q cluster.ViewRequest, fn func(cluster.ViewAnswer) bool) adminapi.Nodes {
	out := adminapi.Nodes{Asked: 1, Answered: []string{v.node}}
	if v.views == nil {
		return out
	}
	expect := map[string]bool{}
	var missing []adminapi.MissingNode
	for _, n := range v.gate.Nodes() {
		if n.Node == v.node {
			continue
		}
		out.Asked++
		switch {
		case !n.Live():
			missing = append(missing, adminapi.MissingNode{Node: n.Node,
				Why: fmt.Sprintf("not heard from for %s", time.Since(n.Seen).Round(time.Second))})
		case n.Level < cluster.LevelClusterView:
			missing = append(missing, adminapi.MissingNode{Node: n.Node,
				Why: fmt.Sprintf("runs an older release (cluster level %d), which does not answer the cluster view", n.Level)})
		default:
			expect[n.Node] = true
		}
	}
	answered := map[string]bool{v.node: true}
	wait, cancel := context.WithTimeout(ctx, v.wait)
	defer cancel()
	q.ID, q.From, q.Time = cluster.NewViewID(), v.node, time.Now()
	pending := len(expect)
	err := v.views.AskView(wait, q, func(a cluster.ViewAnswer) bool {
		if answered[a.Node] {
			return false
		}
		answered[a.Node] = true
		if expect[a.Node] {
			pending--
		} else {
			out.Asked++ // a node the memberships have not heard of yet
		}
		if a.Error != "" {
			missing = append(missing, adminapi.MissingNode{Node: a.Node, Why: "answered without its part: " + a.Error})
			return pending <= 0
		}
		out.Answered = append(out.Answered, a.Node)
		return fn(a) || pending <= 0
	})
	for node := range expect {
		if !answered[node] {
			why := fmt.Sprintf("did not answer within %s", v.wait)
			if err != nil {
				why = "was not asked: " + err.Error()
			}
			missing = append(missing, adminapi.MissingNode{Node: node, Why: why})
		}
	}
	slices.SortFunc(missing, func(a, b adminapi.MissingNode) int { return strings.Compare(a.Node, b.Node) })
	slices.Sort(out.Answered[1:])
	out.Missing = missing
	return out
}

// list is the list f selects across the cluster: each node's page, merged
// newest first into at most f.Limit entries.
func (v *clusterView) list(ctx context.Context, l *eventlog.Log, f eventlog.Filter, query url.Values) adminapi.ClusterPage {
	pages := [][]cluster.ViewEntry{}
	more := []bool{}
	if l != nil {
		p := v.localPage(l, f)
		pages, more = append(pages, p.Entries), append(more, p.More)
	}
	nodes := v.ask(ctx, cluster.ViewRequest{Op: cluster.ViewList, Query: viewQuery(query)}, func(a cluster.ViewAnswer) bool {
		if a.Page != nil {
			pages, more = append(pages, a.Page.Entries), append(more, a.Page.More)
		}
		return false
	})
	limit := f.Limit
	if limit <= 0 || limit > eventlog.MaxLimit {
		limit = eventlog.DefaultLimit
	}
	entries, next := cluster.MergePage(pages, more, limit)
	out := adminapi.ClusterPage{Entries: make([]json.RawMessage, 0, len(entries)), Nodes: nodes}
	for _, en := range entries {
		var b []byte
		if en.Event != nil {
			b, _ = json.Marshal(en.Event)
		} else {
			b, _ = json.Marshal(en.Rows)
		}
		out.Entries = append(out.Entries, b)
	}
	if next && len(entries) > 0 {
		out.Next = entries[len(entries)-1].Time().UTC().Format(time.RFC3339Nano)
	}
	return out
}

// viewQuery is the filter of an admin request, as a view request carries
// it (the page cursor of this node is no other node's: before= is a time).
func viewQuery(q url.Values) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"hook", "status", "reason", "since", "before", "limit", "node"} {
		if val := q.Get(k); val != "" {
			out[k] = val
		}
	}
	return out
}

// detail is the event id wherever it is: this node's, or the first
// node's that holds it.
func (v *clusterView) detail(ctx context.Context, l *eventlog.Log, id string) (*eventlog.EventJSON, adminapi.Nodes) {
	if l != nil {
		if ev, _, ok := l.Get(id); ok {
			ev.Node = v.node
			return &ev, adminapi.Nodes{Asked: 1, Answered: []string{v.node}}
		}
	}
	var found *eventlog.EventJSON
	nodes := v.ask(ctx, cluster.ViewRequest{Op: cluster.ViewDetail, Event: id}, func(a cluster.ViewAnswer) bool {
		if a.Event != nil {
			found = a.Event
			found.Node = a.Node
		}
		return found != nil
	})
	return found, nodes
}

// rates adds up the rates of every node.
func (v *clusterView) rates(ctx context.Context, l *eventlog.Log) (eventlog.RatesJSON, adminapi.Nodes) {
	var parts []eventlog.RatesJSON
	if l != nil {
		parts = append(parts, l.Rates(time.Now()))
	}
	nodes := v.ask(ctx, cluster.ViewRequest{Op: cluster.ViewRates}, func(a cluster.ViewAnswer) bool {
		if a.Rates != nil {
			parts = append(parts, *a.Rates)
		}
		return false
	})
	if len(parts) == 0 {
		parts = append(parts, eventlog.NoRates(time.Now()))
	}
	return cluster.MergeRates(parts), nodes
}

// delivery is the delivery health: the queue, every delivery node (those
// that answer, and those heard of that do not) and whether delivery runs.
func (v *clusterView) delivery(ctx context.Context) adminapi.Delivery {
	now := time.Now()
	var out adminapi.Delivery
	q := cluster.QueueHealth{}
	if v.report != nil {
		q = v.report.queueHealth(ctx)
	}
	out.Queue = adminapi.DeliveryQueue{Depth: q.Depth, InFlight: q.InFlight, DeadLetters: q.DeadCount,
		OldestAgeSeconds: q.Oldest.Seconds(), AckWaitSeconds: q.AckWait.Seconds()}
	if !q.Known {
		out.Queue.Error = "the queue's counters cannot be read now"
	}
	var nodes []cluster.NodeDelivery
	if v.report != nil {
		if f := v.report.facts(now); f != nil {
			nodes = append(nodes, cluster.NodeDelivery{Node: v.node, Answered: true, Heard: now, DeliveryFacts: *f})
		}
	}
	answered := map[string]bool{v.node: true}
	out.Asked = v.ask(ctx, cluster.ViewRequest{Op: cluster.ViewHealth}, func(a cluster.ViewAnswer) bool {
		answered[a.Node] = true
		if a.Health != nil && a.Health.Delivers {
			nodes = append(nodes, cluster.NodeDelivery{Node: a.Node, Answered: true, Heard: a.Time, DeliveryFacts: *a.Health})
		}
		return false
	})
	v.mu.Lock()
	for _, n := range nodes {
		if n.Node != v.node {
			v.memory[n.Node] = &deliveryMemo{facts: n.DeliveryFacts, heard: n.Heard}
		}
	}
	// the delivery nodes that did not answer: as last heard of
	for _, g := range v.gate.Nodes() {
		if !g.Has(cluster.TopicDelivery) || answered[g.Node] {
			continue
		}
		n := cluster.NodeDelivery{Node: g.Node, Heard: g.Seen}
		if m := v.memory[g.Node]; m != nil {
			n.DeliveryFacts = m.facts
			n.Heard = maxTime(n.Heard, m.heard)
		}
		n.Delivers = true
		nodes = append(nodes, n)
		answered[g.Node] = true
	}
	for node, m := range v.memory {
		if now.Sub(m.heard) > cluster.SilentFor || len(v.memory) > maxDeliveryMemory {
			delete(v.memory, node)
			continue
		}
		if !answered[node] {
			nodes = append(nodes, cluster.NodeDelivery{Node: node, Heard: m.heard, DeliveryFacts: m.facts})
		}
	}
	v.mu.Unlock()
	for i := range nodes {
		cluster.JudgeDelivery(&nodes[i], q, now)
	}
	slices.SortFunc(nodes, func(a, b cluster.NodeDelivery) int { return strings.Compare(a.Node, b.Node) })
	out.Nodes = nodes
	if out.Nodes == nil {
		out.Nodes = []cluster.NodeDelivery{}
	}
	out.Summary = cluster.SummarizeDelivery(nodes, q)
	return out
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
