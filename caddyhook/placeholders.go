package caddyhook

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
)

// Placeholders the handler sets on every request it answers, for the
// handlers and logs around it (log_append, intercept's handle_response,
// response header directives, …). They never carry a token or payload
// content.
const (
	// placeholderRoute: wake, agent, the id of the mapping that answered,
	// mapped (a custom hook name no mapping took), challenge (a provider's
	// endpoint handshake, answered at the edge) or none (refused before
	// routing).
	placeholderRoute = "http.hooks.route"
	// placeholderMapping: the id of the mapping that answered; empty for
	// wake, agent and requests no mapping took.
	placeholderMapping = "http.hooks.mapping"
	// placeholderStatus: the status the handler answered with.
	placeholderStatus = "http.hooks.status"
	// placeholderReason: why the request was refused, as the rejection log
	// line says it; empty on success.
	placeholderReason = "http.hooks.reason"
	// placeholderEvent: the event name the answering mapping's provider
	// gave (push, orders/create, …); empty when none.
	placeholderEvent = "http.hooks.event"
)

// setPlaceholders publishes the outcome of ex on r's replacer.
func setPlaceholders(r *http.Request, ex *exchange, status int, herr *hookError) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	reason := ""
	if herr != nil {
		reason = herr.reason
	}
	repl.Set(placeholderRoute, ex.route)
	repl.Set(placeholderMapping, ex.mapping)
	repl.Set(placeholderStatus, statusLabel(status))
	repl.Set(placeholderReason, reason)
	repl.Set(placeholderEvent, ex.event)
}
