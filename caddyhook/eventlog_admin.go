package caddyhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyhook/caddyhook/internal/eventlog"
)

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

// serveEventList answers GET events: a page of entries, newest first.
func serveEventList(w http.ResponseWriter, r *http.Request, lh *liveHandler, _ string) error {
	l, f, err := lh.eventsFiltered(r)
	if err != nil {
		return err
	}
	return writeAdminJSON(w, l.List(f))
}

// serveEventDetail answers GET events/<id> (an event id or any of its
// action ids).
func serveEventDetail(w http.ResponseWriter, _ *http.Request, lh *liveHandler, id string) error {
	l, err := lh.events()
	if err != nil {
		return err
	}
	ev, _, ok := l.Get(id)
	if !ok {
		return apiError(http.StatusNotFound, "no event %q in the log of %s (it may have been evicted)", id, lh.view.base)
	}
	return writeAdminJSON(w, ev)
}

// serveEventRates answers GET events/rates.
func serveEventRates(w http.ResponseWriter, _ *http.Request, lh *liveHandler, _ string) error {
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
	return writeAdminJSON(w, ans)
}

// Live tail timings.
const (
	streamRowsEvery = time.Second      // rejection rows are sent at most this often
	streamKeepAlive = 15 * time.Second // a comment line keeps proxies from closing an idle stream
)

// serveEventStream answers GET events/stream: Server-Sent Events until
// the client goes, the config is replaced or the server shuts down. Each
// accepted or changed event is an "event" message (its id the stream's
// cursor, for Last-Event-ID), rejection rows counted since the last
// second are "rejections" messages, and "lost" says the client fell too
// far behind (reload the list).
func serveEventStream(w http.ResponseWriter, r *http.Request, lh *liveHandler, _ string) error {
	l, f, err := lh.eventsFiltered(r)
	if err != nil {
		return err
	}
	f.Before, f.Limit = 0, 0
	return streamEvents(r.Context(), w, r, l, f)
}

// streamEvents writes the live tail of l to w.
func streamEvents(ctx context.Context, w http.ResponseWriter, r *http.Request, l *eventlog.Log, f eventlog.Filter) error {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // the admin server's read timeout would end the stream
	_ = rc.SetWriteDeadline(time.Time{})
	var sub *eventlog.Subscription
	if v, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64); err == nil {
		sub = l.Resume(v)
	} else {
		sub = l.Subscribe()
	}
	defer sub.Close()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: hooks events\n\n"); err != nil {
		return nil
	}
	_ = rc.Flush()
	var lastRows time.Time
	lastWrite := time.Now()
	for {
		now := time.Now()
		rows := now.Sub(lastRows) >= streamRowsEvery
		if rows {
			lastRows = now
		}
		c := sub.Next(f, rows)
		var b []byte
		if c.Lost {
			b = append(b, "event: lost\ndata: {}\n\n"...)
		}
		for i := range c.Events {
			b = sseMessage(b, "event", c.Version, &c.Events[i])
		}
		for i := range c.Rows {
			b = sseMessage(b, "rejections", 0, &c.Rows[i])
		}
		if len(b) == 0 && now.Sub(lastWrite) >= streamKeepAlive {
			b = append(b, ": keep-alive\n\n"...)
		}
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
			lastWrite = now
		}
		if !sub.Wait(ctx, streamRowsEvery) {
			return nil
		}
	}
}

// sseMessage appends one Server-Sent Events message: its type, its id
// (the stream cursor; 0 = none) and v as one line of JSON.
func sseMessage(b []byte, typ string, id uint64, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		return b
	}
	b = append(b, "event: "...)
	b = append(b, typ...)
	if id != 0 {
		b = append(b, "\nid: "...)
		b = strconv.AppendUint(b, id, 10)
	}
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}
