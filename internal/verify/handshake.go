package verify

import (
	"maps"
	"net/http"
	"slices"

	"github.com/caddyhook/caddyhook/internal/jsonenc"
)

// MaxChallengeLen bounds a challenge the edge echoes.
const MaxChallengeLen = 1024

// Answer is a response the edge gives itself: a handshake's, or a
// provider's acknowledgement of an accepted request.
type Answer struct {
	// Status is the HTTP status.
	Status int
	// Header holds the response headers, Content-Type included when Body
	// is set.
	Header http.Header
	// Body is the response body.
	Body []byte
	// What names the answer for logs and the event log ("meta subscribe
	// handshake"); never a secret or request content.
	What string
}

// clone copies a (nil stays nil).
func (a *Answer) clone() *Answer {
	if a == nil {
		return nil
	}
	b := *a
	b.Header = maps.Clone(a.Header)
	b.Body = slices.Clone(a.Body)
	return &b
}

// textAnswer is 200 text/plain with body, not sniffable.
func textAnswer(what, body string) *Answer {
	return &Answer{Status: http.StatusOK, What: what, Body: []byte(body), Header: http.Header{
		"Content-Type":           {"text/plain; charset=utf-8"},
		"X-Content-Type-Options": {"nosniff"},
	}}
}

// jsonAnswer is 200 application/json with the members kv (name, value
// pairs; values are strings).
func jsonAnswer(what string, kv ...string) *Answer {
	b := []byte{'{'}
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, kv[i])
		b = append(b, ':')
		b = jsonenc.AppendString(b, kv[i+1])
	}
	b = append(b, '}')
	return rawJSONAnswer(what, http.StatusOK, b)
}

// rawJSONAnswer is status with the JSON body b.
func rawJSONAnswer(what string, status int, b []byte) *Answer {
	return &Answer{Status: status, What: what, Body: b, Header: http.Header{
		"Content-Type": {"application/json"},
	}}
}

// emptyAnswer is status without a body.
func emptyAnswer(what string, status int) *Answer {
	return &Answer{Status: status, What: what, Header: http.Header{}}
}

// cleanChallenge returns s when it may be echoed: 1 to MaxChallengeLen
// bytes of printable ASCII (spaces allowed: Microsoft Graph's token has
// them); "" otherwise.
func cleanChallenge(s string) string {
	if len(s) == 0 || len(s) > MaxChallengeLen {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return ""
		}
	}
	return s
}

// hsAuth says how a handshake is authenticated before it is answered.
type hsAuth int

// Handshake authentication.
const (
	hsSigned hsAuth = iota // the provider signs it like any request: verify first
	hsNone                 // nothing to authenticate: an echo that reveals nothing
	hsAnswer               // the answer function authenticates (a token, a secret-keyed answer)
)

// handshakeSpec declares a provider's endpoint handshake.
type handshakeSpec struct {
	// detect reports whether the request is the handshake (cheap: method,
	// a query parameter, a header, one JSON member).
	detect func(c *call) bool
	auth   hsAuth
	// answer builds the answer; s is the provider's built scheme.
	answer func(c *call, s scheme) (*Answer, error)
}

// hsScheme is a scheme with a handshake.
type hsScheme struct {
	scheme
	hs handshakeSpec
}

// withHandshake adds hs to the schemes build makes.
func withHandshake(build func(b *builder) (scheme, error), hs handshakeSpec) func(b *builder) (scheme, error) {
	return func(b *builder) (scheme, error) {
		s, err := build(b)
		if err != nil {
			return nil, err
		}
		return &hsScheme{scheme: s, hs: hs}, nil
	}
}

// offered implements offerer with the inner scheme's headers.
func (w *hsScheme) offered() []string {
	if o, ok := w.scheme.(offerer); ok {
		return o.offered()
	}
	return nil
}

// handshake implements handshaker.
func (w *hsScheme) handshake(c *call) (*Answer, error) {
	if !w.hs.detect(c) {
		return nil, errNotHandshake
	}
	if w.hs.auth == hsSigned {
		if err := w.scheme.verify(c); err != nil {
			return nil, err
		}
	}
	return w.hs.answer(c, w.scheme)
}

// isPost reports whether c's request is a POST.
func isPost(c *call) bool { return c.r.method() == "POST" }

// jsonIs reports whether c's request is a POST whose JSON payload has
// member path equal to want.
func jsonIs(want string, path ...string) func(c *call) bool {
	return func(c *call) bool { return isPost(c) && jsonField(c.json(), path...) == want }
}

// echoJSON answers {"<member>": <the payload's member>} when it may be
// echoed.
func echoJSON(what, member string, path ...string) func(c *call, _ scheme) (*Answer, error) {
	return func(c *call, _ scheme) (*Answer, error) {
		ch := cleanChallenge(jsonField(c.json(), path...))
		if ch == "" {
			return nil, fail(ReasonBadChallenge, "")
		}
		return jsonAnswer(what, member, ch), nil
	}
}

// macOf returns the HMAC scheme inside s (nil when there is none).
func macOf(s scheme) *macScheme {
	switch s := s.(type) {
	case *macScheme:
		return s
	case *hsScheme:
		return macOf(s.scheme)
	}
	return nil
}

// headHandshake answers a HEAD request 200 without a body: the URL check
// some providers make when a webhook is created (nothing to authenticate).
func headHandshake(what string) handshakeSpec {
	return handshakeSpec{
		detect: func(c *call) bool { return c.r.method() == http.MethodHead },
		auth:   hsNone,
		answer: func(*call, scheme) (*Answer, error) { return emptyAnswer(what, http.StatusOK), nil },
	}
}
