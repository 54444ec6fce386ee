package caddyhook

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// The router's signature side: which hook names a provider signature may
// authenticate, whether a request offers one, and the verification of the
// raw request against every signing mapping that could answer it.

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

// verifySignature checks the request (its raw body, and the URL where the
// provider signs it) against every signing mapping that could answer this
// sub-path, before any JSON parsing. It records which verifiers passed
// and the event name each gave; from the first that passed on a mapping
// the request may use (require_token wants the token too), the
// provider's delivery id, the JSON its body stands for (a form, a
// decrypted or wrapped body) and the answer it expects. A request without
// the token and without one valid signature is refused: 401 counted by
// the lockout, or, when a signature verified but its body is unusable,
// 400; when a key could not be fetched, 503.
func (rt *router) verifySignature(ex *exchange) *hookError {
	if !rt.mayVerify(ex.sub) {
		return nil
	}
	var first, payload, unavailable error
	for _, c := range rt.mappings {
		if c.verifier == nil || !rt.answers(c, ex) || slices.Contains(ex.verified, c.verifier) {
			continue
		}
		res, err := c.verifier.VerifyRequest(ex.verifyRequest(), ex.now)
		if err != nil {
			var pe *verify.PayloadError
			var ue *verify.UnavailableError
			switch {
			case errors.As(err, &pe):
				payload = firstErr(payload, err)
			case errors.As(err, &ue):
				unavailable = firstErr(unavailable, err)
			case first == nil:
				first = err
				ex.sigReason = err.Error() // names the header and the failure, never a secret
			}
			continue
		}
		ex.verified = append(ex.verified, c.verifier)
		ex.events = append(ex.events, res.Event)
		if c.needToken && !ex.tokenOK {
			continue // require_token: this mapping cannot answer
		}
		if ex.deliveryID == "" {
			ex.deliveryID = res.DeliveryID
		}
		if ex.payloadJSON == nil && ex.ack == nil {
			ex.payloadJSON, ex.ack = res.Payload, res.Ack
		}
	}
	switch {
	case len(ex.verified) > 0 || ex.tokenOK:
		return nil
	case payload != nil:
		return reject(http.StatusBadRequest, payload.Error())
	case unavailable != nil:
		return unavailableError(unavailable)
	}
	return unauthorized(ex.signatureReason())
}

// firstErr returns the first error set: a, else b.
func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// verifyRetryAfter is the Retry-After of a request whose provider key or
// certificate could not be fetched: the provider retries.
const verifyRetryAfter = 30 * time.Second

// unavailableError is the 503 of a verification that could not run (a
// key or certificate could not be fetched); not an authentication
// failure.
func unavailableError(err error) *hookError {
	e := reject(http.StatusServiceUnavailable, err.Error())
	e.retryAfter = verifyRetryAfter
	return e
}

// verifyFailure is the refusal of a verification error: a bad or missing
// credential is a 401 counted by the lockout; an unusable body whose
// signature verified a 400; a key that could not be fetched a 503.
func verifyFailure(err error) *hookError {
	var pe *verify.PayloadError
	var ue *verify.UnavailableError
	switch {
	case errors.As(err, &pe):
		return reject(http.StatusBadRequest, err.Error())
	case errors.As(err, &ue):
		return unavailableError(err)
	}
	return unauthorized(err.Error())
}
