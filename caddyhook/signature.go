package caddyhook

import (
	"slices"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// reasonNoSignature answers a signed path's request that neither carries
// the hook token nor a valid signature and names no specific failure.
const reasonNoSignature = "invalid or missing signature"

// mayVerify reports whether a request without the hook token could still
// be authenticated by a provider signature on this sub-path. The built-in
// wake and agent paths never accept signatures.
func (h *Handler) mayVerify(sub string) bool {
	if sub == routeWake || sub == routeAgent || sub == "" {
		return false
	}
	return h.verifyAny || h.verifyPaths[sub]
}

// signatureOffered reports whether the request carries the signature
// header of a signing mapping that answers its hook name; when none does,
// ex.sigReason says which header is missing.
func (h *Handler) signatureOffered(ex *exchange) bool {
	for _, c := range h.mappings {
		if c.verifier == nil || !h.answers(c, ex) {
			continue
		}
		err := c.verifier.Offered(ex.r.Header)
		if err == nil {
			return true
		}
		if ex.sigReason == "" {
			ex.sigReason = err.Error()
		}
	}
	return false
}

// verifySignature checks the raw body against every signing mapping that
// could answer this sub-path (before any JSON parsing). It records which
// verifiers passed and, from the first that passed on a mapping the
// request may use (require_token wants the token too), the provider's
// delivery id and a Slack challenge. A request without the token and
// without one valid signature is a 401 that counts toward the lockout.
func (h *Handler) verifySignature(ex *exchange) *hookError {
	if !h.mayVerify(ex.sub) {
		return nil
	}
	var first error
	for _, c := range h.mappings {
		if c.verifier == nil || !h.answers(c, ex) || slices.Contains(ex.verified, c.verifier) {
			continue
		}
		res, err := c.verifier.Verify(ex.r.Header, ex.body, ex.now)
		if err != nil {
			if first == nil {
				first = err
				ex.sigReason = err.Error() // names the header and the failure, never a secret
			}
			continue
		}
		ex.verified = append(ex.verified, c.verifier)
		if c.needToken && !ex.tokenOK {
			continue // require_token: this mapping cannot answer, nor its challenge
		}
		if ex.deliveryID == "" {
			ex.deliveryID = res.DeliveryID
		}
		if ex.challenge == "" {
			ex.challenge = res.Challenge
		}
	}
	if len(ex.verified) > 0 || ex.tokenOK {
		return nil
	}
	return h.authFailed(ex, ex.signatureReason())
}

// signatureReason is the 401 reason for a request whose signature failed.
func (ex *exchange) signatureReason() string {
	if ex.sigReason != "" {
		return ex.sigReason
	}
	return reasonNoSignature
}

// eligible reports whether mapping c may answer this request: a mapping
// without verify needs the hook token; one with verify needs its
// signature, and the token as well when it sets require_token.
func (ex *exchange) eligible(c *compiledMapping) bool {
	if c.verifier == nil {
		return ex.tokenOK
	}
	return slices.Contains(ex.verified, c.verifier) && (!c.needToken || ex.tokenOK)
}

// signatureHeaders lists the headers of every verify block, once each.
func (h *Handler) signatureHeaders() []string {
	var names []string
	for _, m := range h.Mappings {
		if m.Verify == nil {
			continue
		}
		for _, n := range verify.SignatureHeaders(*m.Verify) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}

// newVerifier builds a mapping's verifier, expanding placeholders in the
// secrets only (a layout is not a placeholder string).
func newVerifier(cfg verify.Config, expand func(string) string) (*verify.Verifier, error) {
	secrets := make([]string, len(cfg.Secrets))
	for i, s := range cfg.Secrets {
		secrets[i] = expand(s)
	}
	cfg.Secrets = secrets
	return verify.New(cfg)
}
