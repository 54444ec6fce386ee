package caddyhook

import (
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// The router's handshake side: the endpoint handshakes of the signing
// mappings' providers (Meta's GET hub.challenge, Zoom's url_validation,
// Discord's PING, …), answered at the edge and never dispatched, the
// methods they come with, and the bodies (forms) their providers post.

// routeChallenge is the route (and placeholder value) of a handshake the
// edge answered.
const routeChallenge = "challenge"

// reasonMethodNotAllowed is the 405 of a method the hook name does not
// take (GET or HEAD where no handshake comes with it, or that is no
// handshake).
const reasonMethodNotAllowed = "method not allowed"

// hsCandidate reports whether mapping c's provider may answer a request
// with method as its handshake: its provider has one, and takes the
// method for it (POST always).
func (c *compiledMapping) hsCandidate(method string) bool {
	return c.verifier != nil && c.handshake && (method == http.MethodPost || slices.Contains(c.hsMethods, method))
}

// mayHandshake reports whether ex may be the endpoint handshake of a
// signing mapping that answers its hook name: such a request is read
// (within the unauthenticated bounds) even when it carries neither the
// token nor a signature header, and a method other than POST is let
// through to the handshake.
func (rt *router) mayHandshake(ex *exchange) bool {
	if !rt.handshakes || !rt.mayVerify(ex.sub) {
		return false
	}
	for _, c := range rt.mappings {
		if c.hsCandidate(ex.r.Method) && rt.answers(c, ex) {
			return true
		}
	}
	return false
}

// allowed is the Allow header of a 405 on ex's hook name: POST, and the
// methods the handshakes of the signing mappings answering it take.
func (rt *router) allowed(ex *exchange) string {
	if !rt.handshakes || !rt.mayVerify(ex.sub) {
		return http.MethodPost
	}
	methods := []string{http.MethodPost}
	for _, c := range rt.mappings {
		if c.verifier == nil || !rt.answers(c, ex) {
			continue
		}
		for _, m := range c.hsMethods {
			if !slices.Contains(methods, m) {
				methods = append(methods, m)
			}
		}
	}
	return strings.Join(methods, ", ")
}

// methodNotAllowed is the 405 of ex, naming the methods its hook name
// takes.
func (rt *router) methodNotAllowed(ex *exchange) *hookError {
	e := reject(http.StatusMethodNotAllowed, reasonMethodNotAllowed)
	e.allow = rt.allowed(ex)
	return e
}

// contentOK reports whether ex's body may be dispatched as sent: JSON
// (application/json with parameters, and the +json suffixes); a form
// where a provider of its hook name posts forms (the provider's verifier
// then turns it into JSON: ex.form records it); or JSON under another
// media type a provider of its hook name posts it with (Amazon SNS's
// text/plain).
func (rt *router) contentOK(ex *exchange) bool {
	ct := ex.r.Header.Get("Content-Type")
	if isJSONContentType(ct) {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !rt.mayVerify(ex.sub) {
		return false
	}
	form := mt == "application/x-www-form-urlencoded"
	for _, c := range rt.mappings {
		if c.verifier == nil || !rt.answers(c, ex) {
			continue
		}
		if form && c.form {
			ex.form = true
			return true
		}
		if !form && c.verifier.PostsJSONAs(mt) {
			return true
		}
	}
	return false
}

// handshake answers ex when it is the endpoint handshake of a signing
// mapping that answers its hook name, trying them in order: the answer
// is sent as it is and nothing is dispatched (route challenge). A
// handshake that fails authentication (a wrong verify_token, a bad
// signature) is a 401 counted by the lockout; one that could not be
// completed (an SNS confirmation whose fetch failed) a 503. A
// require_token mapping's handshake is answered only with the token.
// (nil, nil): ex is no handshake.
func (rt *router) handshake(ex *exchange) (*verify.Answer, *hookError) {
	for _, c := range rt.mappings {
		if !c.hsCandidate(ex.r.Method) || !rt.answers(c, ex) || c.needToken && !ex.tokenOK {
			continue
		}
		a, err := c.verifier.Handshake(ex.verifyRequest(), ex.now)
		if err != nil {
			ex.mapping, ex.handshakeBy = c.id, c.verifier.Scheme()
			ex.sigReason = err.Error()
			return nil, verifyFailure(err)
		}
		if a != nil {
			ex.route, ex.mapping, ex.handshakeBy = routeChallenge, c.id, c.verifier.Scheme()
			return a, nil
		}
	}
	return nil, nil
}

// writeAnswer writes an answer the edge gives itself (a handshake's, a
// provider's acknowledgement), with its headers, body and length.
func writeAnswer(w http.ResponseWriter, a *verify.Answer) {
	h := w.Header()
	maps.Copy(h, a.Header)
	if len(a.Body) > 0 || a.Status != http.StatusNoContent {
		h["Content-Length"] = []string{strconv.Itoa(len(a.Body))}
	}
	if _, ok := h["X-Content-Type-Options"]; !ok {
		h["X-Content-Type-Options"] = nosniff[:1:1]
	}
	w.WriteHeader(a.Status)
	if len(a.Body) > 0 {
		_, _ = w.Write(a.Body)
	}
}
