package caddyhook

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/eventlog"
)

// The live tail of the whole cluster (events/stream?scope=cluster): this
// node's changes, and every other node's, which they send to an inbox of
// this stream for a lease it renews every tailRenew. Each renewal says
// which nodes follow: a "nodes" message goes out when that changes (a
// node killed, or back), so that the tail names a node that stopped
// answering and goes on with the others. Each node numbers its batches:
// a gap is a "lost" message naming the node.

// tailMaxRate bounds the entries a cluster tail carries from one node in
// a second (the others are counted, and said "skipped"): what a tail
// costs stays bounded however many requests a node answers, and a
// console or a terminal could not show more anyway.
const tailMaxRate = 100

// tailBudget is one node's share of a tail: what is left of the current
// second, and what was left out since it was last said.
type tailBudget struct {
	left    int
	resetAt time.Time
	skipped uint64
}

// take returns how many entries may go now (the second renewed at now).
func (b *tailBudget) take(now time.Time) int {
	if !now.Before(b.resetAt) {
		b.left, b.resetAt = tailMaxRate, now.Add(time.Second)
	}
	return b.left
}

// spent records n entries sent and skipped left out.
func (b *tailBudget) spent(n, skipped int) {
	b.left = max(b.left-n, 0)
	b.skipped += uint64(skipped)
}

// report returns the skipped count to say now (at most once a second,
// when the second renews) and clears it.
func (b *tailBudget) report(now time.Time) uint64 {
	if b.skipped == 0 || now.Before(b.resetAt) {
		return 0
	}
	n := b.skipped
	b.skipped = 0
	return n
}

// tailNodes is what one renewal learnt: which nodes follow the tail.
type tailNodes struct{ nodes adminapi.Nodes }

// stream writes the cluster's live tail of the entries f selects (query:
// the request's filter, as the other nodes get it) until ctx ends.
func (v *clusterView) stream(ctx context.Context, w http.ResponseWriter, l *eventlog.Log, f eventlog.Filter, query url.Values) error {
	var sub *eventlog.Subscription
	if l != nil {
		sub = l.Subscribe()
		defer sub.Close()
	}
	batches := make(chan cluster.TailBatch, 256)
	renewed := make(chan tailNodes, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if v.views != nil {
		inbox, stop, err := v.views.FollowView(func(b cluster.TailBatch) {
			select {
			case batches <- b:
			case <-ctx.Done():
			}
		})
		if err != nil {
			return fmt.Errorf("cluster view: %w", err)
		}
		defer stop()
		go v.renewTail(ctx, inbox, query, renewed)
	} else {
		renewed <- tailNodes{adminapi.Nodes{Asked: 1, Answered: []string{v.node}}}
	}
	out, ok := startSSE(w, "hooks events, every node")
	if !ok {
		return nil
	}
	localF := f
	localF.Before, localF.Limit = 0, 0
	other := f.Node != "" && f.Node != v.node
	lastN := map[string]uint64{} // each node's last batch number
	var lastNodes string
	var carry []byte      // messages received while waiting, written next
	var budget tailBudget // this node's share
	var lastRows time.Time
	tick := time.NewTicker(streamRowsEvery)
	defer tick.Stop()
	for {
		b, now := carry, time.Now()
		carry = nil
		if sub != nil && !other {
			rows := now.Sub(lastRows) >= streamRowsEvery
			if rows {
				lastRows = now
			}
			if n := budget.report(now); n > 0 {
				b = skippedMessage(b, v.node, n)
			}
			c := sub.NextAtMost(localF, rows, budget.take(now))
			budget.spent(len(c.Events)+len(c.Rows), c.Skipped)
			if c.Lost {
				b = sseMessage(b, "lost", 0, map[string]string{"node": v.node})
			}
			for i := range c.Events {
				c.Events[i].Node = v.node
				b = sseMessage(b, "event", 0, &c.Events[i])
			}
			for i := range c.Rows {
				c.Rows[i].Node = v.node
				b = sseMessage(b, "rejections", 0, &c.Rows[i])
			}
		}
	drain:
		for {
			select {
			case tb := <-batches:
				b = v.tailBatch(b, tb, lastN)
			case tn := <-renewed:
				b = nodesMessage(b, tn, &lastNodes)
			default:
				break drain
			}
		}
		if !out.send(b, now) {
			return nil
		}
		var changed <-chan struct{}
		if sub != nil {
			changed = sub.Changed()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		case tb := <-batches:
			carry = v.tailBatch(carry, tb, lastN)
		case tn := <-renewed:
			carry = nodesMessage(carry, tn, &lastNodes)
		}
	}
}

// skippedMessage appends a "skipped" message: n changes of node left
// out (more than tailMaxRate a second).
func skippedMessage(b []byte, node string, n uint64) []byte {
	return sseMessage(b, "skipped", 0, struct {
		Node  string `json:"node"`
		Count uint64 `json:"count"`
		Max   int    `json:"max_per_second"`
	}{node, n, tailMaxRate})
}

// nodesMessage appends a "nodes" message when the nodes that follow the
// tail changed since last.
func nodesMessage(b []byte, tn tailNodes, last *string) []byte {
	if key := fmt.Sprint(tn.nodes.Answered, tn.nodes.Missing); key != *last {
		*last = key
		b = sseMessage(b, "nodes", 0, tn.nodes)
	}
	return b
}

// tailBatch appends the messages of a batch another node sent: its
// entries, and "lost" when its numbers skip (a batch missing) or it fell
// behind its own log.
func (v *clusterView) tailBatch(b []byte, tb cluster.TailBatch, lastN map[string]uint64) []byte {
	if last, ok := lastN[tb.Node]; (ok && tb.N != last+1) || tb.Lost {
		b = sseMessage(b, "lost", 0, map[string]string{"node": tb.Node})
	}
	lastN[tb.Node] = tb.N
	if tb.Done {
		delete(lastN, tb.Node)
	}
	if tb.Skipped > 0 {
		b = skippedMessage(b, tb.Node, tb.Skipped)
	}
	for _, en := range tb.Entries {
		switch {
		case en.Event != nil:
			en.Event.Node = tb.Node
			b = sseMessage(b, "event", 0, en.Event)
		case en.Rows != nil:
			en.Rows.Node = tb.Node
			b = sseMessage(b, "rejections", 0, en.Rows)
		}
	}
	return b
}

// renewTail asks every node to follow the tail to inbox, every
// tailRenew, and reports which did, until ctx ends.
func (v *clusterView) renewTail(ctx context.Context, inbox string, query url.Values, renewed chan tailNodes) {
	t := time.NewTicker(tailRenew)
	defer t.Stop()
	for {
		nodes := v.ask(ctx, cluster.ViewRequest{Op: cluster.ViewTail, Inbox: inbox, Until: time.Now().Add(tailLease),
			Query: viewQuery(query)}, func(a cluster.ViewAnswer) bool {
			return false
		})
		if ctx.Err() != nil {
			return
		}
		slices.Sort(nodes.Answered)
		select { // only the latest counts
		case <-renewed:
		default:
		}
		renewed <- tailNodes{nodes}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
