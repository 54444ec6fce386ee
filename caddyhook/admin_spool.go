package caddyhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

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
	action, target := "retry", "all dead letters"
	if verb == "dropped" {
		action = "drop"
	}
	if !sel.All {
		target = deadTarget(sel.IDs)
	}
	lh.view.events.operator(r, action, target, fmt.Sprintf("%s %d dead letter%s", verb, n, map[bool]string{true: "", false: "s"}[n == 1]))
	lh.view.logger.Info("dead letters "+verb+" through the admin API", zap.Int("count", n), zap.Bool("all", sel.All),
		zap.String("operator", operatorOf(r)))
	return writeAdminJSON(w, map[string]int{verb: n})
}

// deadTarget names the dead letters an action was asked for (the first
// few ids).
func deadTarget(ids []string) string {
	const shown = 3
	if len(ids) <= shown {
		return strings.Join(ids, " ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:shown], " "), len(ids)-shown)
}

// servePause answers POST /hooks/spool/pause and /resume.
func servePause(w http.ResponseWriter, r *http.Request, lh *liveHandler, what string) error {
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
	target := "delivery from " + lh.view.spoolDir
	if node := lh.view.view.nodeName(); node != "" {
		target += " on " + node
	}
	lh.view.events.operator(r, what, target, "delivery "+map[bool]string{true: "paused", false: "resumed"}[pause])
	lh.view.logger.Info("delivery "+what+"d through the admin API", zap.String("spool", lh.view.spoolDir), zap.String("operator", operatorOf(r)))
	return writeAdminJSON(w, map[string]bool{"paused": pause})
}

// serveDelivery answers GET /hooks/spool/delivery: the queue, every
// delivery node (in a cluster: those that answer and those heard of that
// do not) and whether delivery runs.
func serveDelivery(w http.ResponseWriter, r *http.Request, lh *liveHandler, _ string) error {
	if _, err := lh.spool(); err != nil {
		return err
	}
	return writeAdminJSON(w, lh.view.view.delivery(r.Context()))
}

// spool returns the handler's spool, or a 404 when it has none.
func (lh *liveHandler) spool() (spool.Ops, error) {
	if lh.view.spool == nil {
		return nil, apiError(http.StatusNotFound, "the hooks handler at %s has no spool", lh.view.base)
	}
	return lh.view.spool, nil
}
