package caddyhook

import (
	"slices"
)

// The router's signature side: which hook names a provider signature may
// authenticate, whether a request offers one, and the verification of the
// raw body against every signing mapping that could answer it.

// mayVerify reports whether a request without the hook token could still
// be authenticated by a provider signature on this sub-path. The built-in
// wake and agent paths never accept signatures.
func (rt *router) mayVerify(sub string) bool {
	if sub == routeWake || sub == routeAgent || sub == "" {
		return false
	}
	return rt.verifyAny || rt.verifyPaths[sub]
}

// signatureOffered reports whether the request carries the signature
// header of a signing mapping that answers its hook name; when none does,
// ex.sigReason says which header is missing.
func (rt *router) signatureOffered(ex *exchange) bool {
	for _, c := range rt.mappings {
		if c.verifier == nil || !rt.answers(c, ex) {
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
func (rt *router) verifySignature(ex *exchange) *hookError {
	if !rt.mayVerify(ex.sub) {
		return nil
	}
	var first error
	for _, c := range rt.mappings {
		if c.verifier == nil || !rt.answers(c, ex) || slices.Contains(ex.verified, c.verifier) {
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
	return unauthorized(ex.signatureReason())
}
