package caddyhook

import "net/http"

// Built-in hook names.
const (
	routeWake  = "wake"
	routeAgent = "agent"
)

// plan resolves the request's sub-path to the actions it asks for:
// wake and agent are built in (decoded with the gateway's request rules;
// in forward mode then forwarded as sent); any other name goes through
// the mappings.
func (h *Handler) plan(ex *exchange) (plan, *hookError) {
	var (
		a   Action
		err error
	)
	switch ex.sub {
	case routeWake:
		ex.route = routeWake
		a, err = decodeWake(ex.payload)
	case routeAgent:
		ex.route = routeAgent
		a, err = h.policy.decodeAgent(ex.payload)
		a.Source = sourceWebhook
	default:
		return h.planMapped(ex)
	}
	if !ex.tokenOK {
		return plan{}, h.authFailed(ex, "invalid or missing token")
	}
	if err != nil {
		return plan{}, reject(http.StatusBadRequest, err.Error())
	}
	a.fromRequest = true
	p := plan{actions: []Action{a}}
	if h.forward {
		var herr *hookError
		if p.fwd, herr = h.forwardBuiltin(ex, &a); herr != nil {
			return plan{}, herr
		}
	}
	return p, nil
}
