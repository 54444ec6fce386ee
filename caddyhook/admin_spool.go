package caddyhook

import (
	"encoding/json"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/eventlog"
)

// serveDeadLetters lists the dead letters in acceptance order.
func serveDeadLetters(w http.ResponseWriter, r *http.Request, lh *liveHandler, _ string) error {
	ops, err := lh.spool()
	if err != nil {
		return err
	}
	dead, err := ops.DeadLetters()
	if err != nil {
		return apiError(http.StatusServiceUnavailable, "spool of %s: %v", lh.view.base, err)
	}
	q := r.URL.Query().Get("body")
	withBody := q != "" && q != "0" && q != "false"
	out := make([]adminapi.DeadLetter, len(dead))
	for i, ev := range dead {
		out[i] = adminapi.DeadLetterOf(ev, withBody)
	}
	return writeAdminJSON(w, out)
}

// serveRetryDrop answers POST /hooks/spool/dead/retry and /drop (verb is
// "retried" or "dropped").
func serveRetryDrop(w http.ResponseWriter, r *http.Request, lh *liveHandler, verb string) error {
	ops, err := lh.spool()
	if err != nil {
		return err
	}
	var sel adminapi.DeadSelection
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sel); err != nil {
		return apiError(http.StatusBadRequest, `want {"ids": ["<event id>", ...]} or {"all": true}: %v`, err)
	}
	switch {
	case sel.All && len(sel.IDs) > 0:
		return apiError(http.StatusBadRequest, `give "ids" or "all", not both`)
	case !sel.All && len(sel.IDs) == 0:
		return apiError(http.StatusBadRequest, `give the event "ids", or "all": true`)
	}
	op, state := ops.Retry, eventlog.StateQueued
	if verb == "dropped" {
		op, state = ops.Drop, eventlog.StateDropped
	}
	ids := sel.IDs
	if sel.All && lh.view.events != nil {
		if dead, err := ops.DeadLetters(); err == nil {
			for _, ev := range dead {
				ids = append(ids, ev.ID)
			}
		}
	}
	n, err := op(sel.IDs...) // no ids (all: true) = every dead letter
	if err != nil {
		return apiError(http.StatusServiceUnavailable, "spool of %s: %v", lh.view.base, err)
	}
	lh.view.outcomes.operator(ids, state)
	lh.view.logger.Info("dead letters "+verb+" through the admin API", zap.Int("count", n), zap.Bool("all", sel.All))
	return writeAdminJSON(w, map[string]int{verb: n})
}

// servePause answers POST /hooks/spool/pause and /resume.
func servePause(w http.ResponseWriter, _ *http.Request, lh *liveHandler, what string) error {
	ops, err := lh.spool()
	if err != nil {
		return err
	}
	pause := what == "pause"
	if pause {
		err = ops.Pause()
	} else {
		err = ops.Resume()
	}
	if err != nil {
		return apiError(http.StatusServiceUnavailable, "spool of %s: %v", lh.view.base, err)
	}
	return writeAdminJSON(w, map[string]bool{"paused": pause})
}

// spool returns the handler's spool, or a 404 when it has none.
func (lh *liveHandler) spool() (spool.Ops, error) {
	if lh.view.spool == nil {
		return nil, apiError(http.StatusNotFound, "the hooks handler at %s has no spool", lh.view.base)
	}
	return lh.view.spool, nil
}
