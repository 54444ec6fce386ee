package devgw

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/google/uuid"
)

// leanBufPool recycles request bodies of the lean mode.
var leanBufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Replies of the lean mode, in the shapes the full mode answers with.
var (
	leanWakeNow  = []byte(`{"ok":true,"mode":"now","eventOutcome":"enqueued"}` + "\n")
	leanWakeNext = []byte(`{"ok":true,"mode":"next-heartbeat","eventOutcome":"enqueued"}` + "\n")
	leanInvalid  = []byte(`{"ok":false,"error":"invalid JSON"}` + "\n")
)

// serveLean answers an authorised POST for kind without decoding the body
// into maps: the body must be valid JSON, the reply has the full mode's
// shape, and only the counts are kept (no records, events, idempotency
// replay or field validation). It is a cheap, neutral sink for load tests.
func (g *Gateway) serveLean(w http.ResponseWriter, r *http.Request, kind string) {
	buf := leanBufPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 {
			buf.Reset()
			leanBufPool.Put(buf)
		}
	}()
	_, err := buf.ReadFrom(io.LimitReader(r.Body, 4<<20))
	if err != nil || !json.Valid(buf.Bytes()) {
		writeLean(w, http.StatusBadRequest, leanInvalid)
		return
	}
	g.mu.Lock()
	g.counts[kind]++
	g.mu.Unlock()
	switch {
	case kind != "wake":
		b := make([]byte, 0, 64)
		b = append(b, `{"ok":true,"runId":"`...)
		b = append(b, uuid.NewString()...)
		writeLean(w, http.StatusOK, append(b, "\"}\n"...))
	case bytes.Contains(buf.Bytes(), []byte(`"mode":"next-heartbeat"`)):
		writeLean(w, http.StatusOK, leanWakeNext)
	default:
		writeLean(w, http.StatusOK, leanWakeNow)
	}
}

// writeLean writes a JSON reply with its length.
func writeLean(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
