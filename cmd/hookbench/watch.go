package main

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyhook/caddyhook/internal/adminapi"
)

// Row (w) measures what the cluster view costs the request path: while
// it runs, an operator's console is open on its handler (the console's
// refresh, every consolePoll: the status, the event list, the rates, the
// dead letters, the delivery health and the lockouts, the cluster-wide
// ones with ?scope=cluster) and a cluster tail is attached (the live
// tail of every node, as `caddy hooks tail --cluster` reads it). Its
// ratio to (l), the same site without them, is the overhead.

// consolePoll is how often the console refreshes (console.js).
const consolePoll = 3 * time.Second

// watchedPath is row (w)'s base path: its handler, for the admin API.
const watchedPath = "/watched"

// watchReport says what the watchers of row (w) did while it ran.
type watchReport struct {
	Polls    uint64 `json:"console_polls"`   // console refreshes done
	Messages uint64 `json:"stream_messages"` // messages of the cluster tail read
	Errors   uint64 `json:"errors"`          // requests that failed
	LastErr  string `json:"last_error,omitempty"`
	mu       sync.Mutex
}

// watcher is the console and the cluster tail of one segment of row (w).
type watcher struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// watch opens the console and the cluster tail on the admin socket sock
// until stop, counting into rep.
func watch(sock string, rep *watchReport) (stop func()) {
	ac, err := adminapi.NewClient("unix/" + sock)
	if err != nil {
		rep.fail(err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{cancel: cancel}
	q := func(extra string) string {
		return "?" + url.Values{"path": {watchedPath}}.Encode() + extra
	}
	w.done.Add(2)
	go func() { // the cluster tail
		defer w.done.Done()
		for ctx.Err() == nil {
			resp, err := ac.Stream(ctx, adminapi.Prefix+"events/stream"+q("&scope=cluster"), "")
			if err != nil {
				if ctx.Err() == nil {
					rep.fail(err)
					time.Sleep(100 * time.Millisecond)
				}
				continue
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 4<<20)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "event: ") {
					atomic.AddUint64(&rep.Messages, 1)
				}
			}
			resp.Body.Close()
		}
	}()
	go func() { // the console
		defer w.done.Done()
		t := time.NewTicker(consolePoll)
		defer t.Stop()
		for {
			for _, route := range []string{"" + q(""), "events" + q("&scope=cluster&limit=100"), "events/rates" + q("&scope=cluster"),
				"spool/dead" + q(""), "spool/delivery" + q(""), "lockouts" + q("&limit=200")} {
				var into any
				if err := ac.Do(http.MethodGet, adminapi.Prefix+route, nil, &into); err != nil && ctx.Err() == nil {
					rep.fail(err)
				}
			}
			atomic.AddUint64(&rep.Polls, 1)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		w.cancel()
		w.done.Wait()
	}
}

// fail counts a failed request.
func (r *watchReport) fail(err error) {
	atomic.AddUint64(&r.Errors, 1)
	r.mu.Lock()
	r.LastErr = err.Error()
	r.mu.Unlock()
}
