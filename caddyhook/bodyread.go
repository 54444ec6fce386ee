package caddyhook

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Defaults of unauthenticated_bodies.
const (
	defaultUnauthBodies  = 256
	defaultUnauthTimeout = 10 * time.Second
)

// An early answer (one decided before the body is read) keeps the
// connection when a body of at most earlyDrainLimit bytes arrives within
// earlyDrainWait; else it closes it, reading what still comes of the body
// for at most lateBodyGrace (see settleUnreadBody).
const (
	earlyDrainLimit = 64 << 10
	earlyDrainWait  = 20 * time.Millisecond
	lateBodyGrace   = 2 * time.Second
)

// reasonBodyTimeout answers a body that did not arrive in time (the
// reference gateway's text and status, 408).
const reasonBodyTimeout = "request body timeout"

// UnauthenticatedBodies bounds the request bodies read before the request
// is authenticated: on a hook name that a verify mapping answers, a
// request without the hook token must be read to check its signature.
type UnauthenticatedBodies struct {
	// Max is how many such bodies are read at once (default 256); one
	// more is answered 503 with Retry-After at once.
	Max int `json:"max,omitempty"`
	// Timeout is how long one such body may take to arrive (default 10s);
	// a slower or abandoned body is answered 408 and counts as an
	// authentication failure of its address.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// unauthReads is the handler's allowance of unauthenticated body reads.
type unauthReads struct {
	slots   chan struct{}
	timeout time.Duration
}

// provisionUnauthReads fills the defaults of unauthenticated_bodies.
func (h *Handler) provisionUnauthReads() error {
	u := UnauthenticatedBodies{Max: defaultUnauthBodies, Timeout: caddy.Duration(defaultUnauthTimeout)}
	if c := h.UnauthenticatedBodies; c != nil {
		if c.Max < 0 || c.Max > 1<<16 {
			return fmt.Errorf("unauthenticated_bodies: %d must be between 1 and 65536", c.Max)
		}
		if c.Timeout < 0 || time.Duration(c.Timeout) > 10*time.Minute {
			return fmt.Errorf("unauthenticated_bodies: timeout %s must be between 1ms and 10m", time.Duration(c.Timeout))
		}
		if c.Max > 0 {
			u.Max = c.Max
		}
		if c.Timeout > 0 {
			u.Timeout = c.Timeout
		}
	}
	h.UnauthenticatedBodies = &u
	h.unauth = &unauthReads{slots: make(chan struct{}, u.Max), timeout: time.Duration(u.Timeout)}
	return nil
}

// begin takes a slot for one unauthenticated read and sets the read
// deadline of w's connection; ok is false when every slot is taken. The
// caller calls end when the read is over.
func (u *unauthReads) begin(w http.ResponseWriter, now time.Time) (ok bool) {
	select {
	case u.slots <- struct{}{}:
	default:
		return false
	}
	if w != nil {
		setReadDeadline(w, now.Add(u.timeout))
	}
	return true
}

// end gives the slot back.
func (u *unauthReads) end() { <-u.slots }

// settleUnreadBody prepares an answer given without reading the request
// body (a rejection decided before it: wrong token, locked out, wrong
// content type, …). Go's HTTP/1 server would otherwise read the rest of
// the body before sending the answer, so a client that declares a body and
// never sends it would hold the connection, unanswered, until a server
// timeout. A small body that has arrived (or arrives within
// earlyDrainWait) is drained and the connection kept; otherwise the answer
// goes out at once and closes the connection; the read deadline lets the
// server read what still comes of the body for at most lateBodyGrace
// after the answer, so that a client still sending it sees the answer
// rather than a reset (Caddy's read idle timeout may end that sooner).
func settleUnreadBody(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 || r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	now := time.Now()
	// (a body that awaits "100 Continue" is not read: that would ask for it)
	if r.ContentLength <= earlyDrainLimit && setReadDeadline(w, now.Add(earlyDrainWait)) &&
		r.Header.Get("Expect") == "" && drainArrived(r.Body, earlyDrainLimit) {
		return // the server clears the deadline once the body is done
	}
	setReadDeadline(w, now.Add(lateBodyGrace))
	w.Header()["Connection"] = connectionClose[:1:1]
}

// tooLargeDrain bounds what is read and thrown away of an authenticated
// request's body over the limit before its 413 goes out.
const tooLargeDrain = 4 << 20

// discardTooLarge reads the rest of an authenticated sender's body that
// is over the limit, at most tooLargeDrain bytes within lateBodyGrace, and
// reports whether it got to the end (the connection is then kept). A
// sender still writing its body would otherwise see the connection reset
// instead of the 413; the reference gateway, too, answers 413 and then
// reads and discards what still comes. An unauthenticated body is never
// read this way.
func discardTooLarge(w http.ResponseWriter, r *http.Request, now time.Time) bool {
	if w == nil || r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody ||
		r.ContentLength > tooLargeDrain || r.Header.Get("Expect") != "" ||
		!setReadDeadline(w, now.Add(lateBodyGrace)) {
		return false
	}
	return drainArrived(r.Body, tooLargeDrain)
}

// connectionClose is the header value of an answer that closes the
// connection (shared; its capacity is its length).
var connectionClose = []string{"close"}

// drainBufs are the buffers drainArrived reads into.
var drainBufs = sync.Pool{New: func() any { return new([4 << 10]byte) }}

// drainArrived reads body to its end, at most limit bytes, and reports
// whether it got there.
func drainArrived(body io.Reader, limit int) bool {
	buf := drainBufs.Get().(*[4 << 10]byte)
	defer drainBufs.Put(buf)
	for n := 0; n <= limit; {
		m, err := body.Read(buf[:])
		n += m
		if err == io.EOF {
			return n <= limit
		}
		if err != nil {
			return false
		}
	}
	return false
}

// setReadDeadline sets the read deadline of w's connection, as
// http.ResponseController does (through the wrappers' Unwrap) but without
// allocating; false where the writer cannot.
func setReadDeadline(w http.ResponseWriter, d time.Time) bool {
	for {
		switch t := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			return t.SetReadDeadline(d) == nil
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

// readRequestBody reads the body through the hook name's limit. A body
// read before the request is authenticated (one a signature must
// authenticate) takes one of the unauthenticated_bodies slots and has a
// read deadline; a slow or abandoned one counts as an authentication
// failure of its address.
func (h *Handler) readRequestBody(ex *exchange) *hookError {
	unauth := !ex.tokenOK
	if unauth {
		if !h.unauth.begin(ex.w, ex.now) {
			return &hookError{status: http.StatusServiceUnavailable, reason: reasonTooManyUnauth, retryAfter: time.Second}
		}
		defer h.unauth.end()
	}
	var err error
	ex.body, err = readBody(ex.r, h.bodyLimit(ex.sub), ex.body)
	switch {
	case err == nil:
		ex.bodyDone = true
		return nil
	case err == errBodyTooLarge:
		if !unauth {
			ex.bodyDone = discardTooLarge(ex.w, ex.r, ex.now)
		}
		return reject(http.StatusRequestEntityTooLarge, reasonTooLarge)
	case unauth && isTimeout(err):
		return h.failure(ex, http.StatusRequestTimeout, reasonBodyTimeout)
	case unauth:
		return h.failure(ex, http.StatusBadRequest, "could not read body")
	case isTimeout(err):
		return reject(http.StatusRequestTimeout, reasonBodyTimeout)
	}
	return reject(http.StatusBadRequest, "could not read body")
}
