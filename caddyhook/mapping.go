package caddyhook

import "net/http"

// Content sources named in the external-content wrapper.
const (
	sourceWebhook = "Webhook"
	sourceEmail   = "Email"
)

// mayVerify reports whether a request without the hook token could still
// be authenticated by a provider signature on this sub-path.
func (h *Handler) mayVerify(sub string) bool { return false }

// verifySignature authenticates a token-less request by signature.
func (h *Handler) verifySignature(ex *exchange) *hookError { return nil }

// bodyLimit is the body bound for sub: the largest any candidate mapping allows.
func (h *Handler) bodyLimit(sub string) int64 { return h.MaxBody }

// planMapped resolves a custom hook name through the mappings.
func (h *Handler) planMapped(ex *exchange) (plan, *hookError) {
	return plan{}, reject(http.StatusNotFound, "no mapping for hook")
}
