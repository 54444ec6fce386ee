package caddyhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/eventlog"
)

// With ?scope=cluster the event list, an event, the rates and the stream
// (the events routes of adminRoutes) cover every node of the cluster
// (cluster_view.go): each entry says its "node", and the answer which
// nodes answered ("nodes").

// events returns the handler's event log, or a 404 when it is off.
func (lh *liveHandler) events() (*eventlog.Log, error) {
	if lh.view.events == nil {
		return nil, apiError(http.StatusNotFound, "the hooks handler at %s has its event log off (events off)", lh.view.base)
	}
	return lh.view.events.eventLog(), nil
}

// eventsFiltered returns the handler's event log and the request's filter.
func (lh *liveHandler) eventsFiltered(r *http.Request) (*eventlog.Log, eventlog.Filter, error) {
	l, err := lh.events()
	if err != nil {
		return nil, eventlog.Filter{}, err
	}
	f, err := eventlog.ParseFilter(r.URL.Query(), time.Now())
	if err != nil {
		return nil, f, apiError(http.StatusBadRequest, "%v", err)
	}
	return l, f, nil
}

// clusterEvents is, for a ?scope=cluster request, this node's event log
// (nil when off: the other nodes may have theirs) and the filter; cluster
// is false for a request about this node alone.
func (lh *liveHandler) clusterEvents(r *http.Request) (l *eventlog.Log, f eventlog.Filter, cluster bool, err error) {
	if cluster, err = scope(r); err != nil || !cluster {
		return nil, f, false, err
	}
	if f, err = eventlog.ParseFilter(r.URL.Query(), time.Now()); err != nil {
		return nil, f, true, apiError(http.StatusBadRequest, "%v", err)
	}
	return lh.view.view.log(), f, true, nil
}

// serveEventList answers GET events: a page of entries, newest first.
func serveEventList(w http.ResponseWriter, r *http.Request, lh *liveHandler, _ string) error {
	if l, f, cluster, err := lh.clusterEvents(r); err != nil || cluster {
		if err != nil {
			return err
		}
		return writeAdminJSON(w, lh.view.view.list(r.Context(), l, f, r.URL.Query()))
	}
	l, f, err := lh.eventsFiltered(r)
	if err != nil {
		return err
	}
	p := l.List(f)
	if node := lh.view.view.nodeName(); node != "" {
		if f.Node != "" && f.Node != node {
			p.Entries = p.Entries[:0]
		}
		for i, en := range p.Entries {
			p.Entries[i] = lh.view.view.entry(en).Value()
		}
	}
	return writeAdminJSON(w, p)
}

// serveEventDetail answers GET events/<id> (an event id or any of its
// action ids).
func serveEventDetail(w http.ResponseWriter, r *http.Request, lh *liveHandler, id string) error {
	if l, _, cluster, err := lh.clusterEvents(r); err != nil || cluster {
		if err != nil {
			return err
		}
		ev, nodes := lh.view.view.detail(r.Context(), l, id)
		if ev == nil {
			return apiError(http.StatusNotFound, "no event %q on any node of the cluster (it may have been evicted); %s", id, nodes.Summary())
		}
		return writeAdminJSON(w, ev)
	}
	l, err := lh.events()
	if err != nil {
		return err
	}
	ev, _, ok := l.Get(id)
	if !ok {
		return apiError(http.StatusNotFound, "no event %q in the log of %s (it may have been evicted)", id, lh.view.base)
	}
	ev.Node = lh.view.view.nodeName()
	return writeAdminJSON(w, ev)
}

// clusterRates is GET events/rates?scope=cluster: every node's rates
// added up, and which nodes they are.
type clusterRates struct {
	eventlog.RatesJSON
	Nodes adminapi.Nodes `json:"nodes"`
}

// serveEventRates answers GET events/rates.
func serveEventRates(w http.ResponseWriter, r *http.Request, lh *liveHandler, _ string) error {
	if l, _, cluster, err := lh.clusterEvents(r); err != nil || cluster {
		if err != nil {
			return err
		}
		rates, nodes := lh.view.view.rates(r.Context(), l)
		return writeAdminJSON(w, clusterRates{rates, nodes})
	}
	l, err := lh.events()
	if err != nil {
		return err
	}
	return writeAdminJSON(w, l.Rates(time.Now()))
}

// serveReplay answers POST events/<id>/replay.
func serveReplay(w http.ResponseWriter, r *http.Request, lh *liveHandler, id string) error {
	if _, err := lh.events(); err != nil {
		return err
	}
	ans, err := lh.view.events.replay(r.Context(), id, lh.view.sink)
	if refused, ok := errors.AsType[replayRefusedError](err); ok {
		return apiError(refused.status, "%s", refused.msg)
	}
	if err != nil {
		return err
	}
	detail := fmt.Sprintf("replayed as %s: %d", ans.ID, ans.Status)
	if ans.Reason != "" {
		detail += " " + ans.Reason
	}
	lh.view.events.operator(r, "replay", id, detail)
	return writeAdminJSON(w, ans)
}

// operator records an operator's action in the event log: who
// (operatorOf), what, on what, and what it did. Nil-safe (events off).
func (rec *eventRecorder) operator(r *http.Request, action, target, detail string) {
	if rec == nil {
		return
	}
	rec.log.Operator(&eventlog.Event{ID: uuid.NewString(), Time: time.Now(), Path: rec.base, Auth: "operator",
		Status: http.StatusOK, Action: action, Operator: operatorOf(r), Target: target, Reason: detail})
}

// serveEventStream answers GET events/stream: Server-Sent Events until
// the client goes, the config is replaced or the server shuts down. Each
// accepted or changed event is an "event" message (its id the stream's
// cursor, for Last-Event-ID), rejection rows counted since the last
// second are "rejections" messages, and "lost" says the client fell too
// far behind (reload the list).
func serveEventStream(w http.ResponseWriter, r *http.Request, lh *liveHandler, _ string) error {
	if l, f, cluster, err := lh.clusterEvents(r); err != nil || cluster {
		if err != nil {
			return err
		}
		if err := lh.view.view.stream(r.Context(), w, l, f, r.URL.Query()); err != nil {
			return apiError(http.StatusServiceUnavailable, "%v", err)
		}
		return nil
	}
	l, f, err := lh.eventsFiltered(r)
	if err != nil {
		return err
	}
	f.Before, f.Limit = 0, 0
	return streamEvents(r.Context(), w, r, l, f, lh.view.view.nodeName())
}

// streamEvents writes the live tail of l to w, each entry with node (in
// a cluster: this node's name).
func streamEvents(ctx context.Context, w http.ResponseWriter, r *http.Request, l *eventlog.Log, f eventlog.Filter, node string) error {
	var sub *eventlog.Subscription
	if v, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64); err == nil {
		sub = l.Resume(v)
	} else {
		sub = l.Subscribe()
	}
	defer sub.Close()
	out, ok := startSSE(w, "hooks events")
	if !ok {
		return nil
	}
	var lastRows time.Time
	for {
		now := time.Now()
		rows := now.Sub(lastRows) >= streamRowsEvery
		if rows {
			lastRows = now
		}
		c := sub.Next(f, rows)
		if f.Node != "" && f.Node != node {
			c = eventlog.Changes{Version: c.Version}
		}
		var b []byte
		if c.Lost {
			b = append(b, "event: lost\ndata: {}\n\n"...)
		}
		for i := range c.Events {
			c.Events[i].Node = node
			b = sseMessage(b, "event", c.Version, &c.Events[i])
		}
		for i := range c.Rows {
			c.Rows[i].Node = node
			b = sseMessage(b, "rejections", 0, &c.Rows[i])
		}
		if !out.send(b, now) || !sub.Wait(ctx, streamRowsEvery) {
			return nil
		}
	}
}
