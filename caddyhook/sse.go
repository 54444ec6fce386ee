package caddyhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// What the live tails share (eventlog_admin.go, this node's; and
// cluster_view_tail.go, every node's): their timings and their messages.

// Live tail timings.
const (
	streamRowsEvery = time.Second      // rejection rows are sent at most this often
	streamKeepAlive = 15 * time.Second // a comment line keeps proxies from closing an idle stream
)

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

// sseStream is the writing side of a live tail: the response, and when
// it was last written to (a keep-alive comment follows a quiet
// streamKeepAlive).
type sseStream struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	lastWrite time.Time
}

// startSSE answers 200 with an event stream whose first comment is
// hello; ok is false when the client is gone already. The admin server's
// read and write timeouts would end the stream: they are lifted.
func startSSE(w http.ResponseWriter, hello string) (*sseStream, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, "retry: 2000\n: %s\n\n", hello); err != nil {
		return nil, false
	}
	_ = rc.Flush()
	return &sseStream{w: w, rc: rc, lastWrite: time.Now()}, true
}

// send writes b (a keep-alive comment when b is empty and the stream was
// quiet long enough) and flushes it; false when the client is gone.
func (s *sseStream) send(b []byte, now time.Time) bool {
	if len(b) == 0 && now.Sub(s.lastWrite) >= streamKeepAlive {
		b = append(b, ": keep-alive\n\n"...)
	}
	if len(b) == 0 {
		return true
	}
	if _, err := s.w.Write(b); err != nil {
		return false
	}
	if err := s.rc.Flush(); err != nil {
		return false
	}
	s.lastWrite = now
	return true
}
