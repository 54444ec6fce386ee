package verify

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Limits and defaults.
const (
	// DefaultTolerance is the timestamp tolerance when Config.Tolerance is
	// 0 and the provider names no other.
	DefaultTolerance = 300 * time.Second
	// MinSecretLen is the shortest accepted secret (decoded key for standard).
	MinSecretLen = 16
	// MaxSecrets bounds the secrets (and public keys) per block; each costs
	// one check per request.
	MaxSecrets = 8
	// MaxSignatures bounds the signature entries considered in one header.
	MaxSignatures = 16
	// MaxDeliveryIDLen is the longest delivery id returned; longer ids (or
	// ids with bytes outside printable ASCII) are not returned.
	MaxDeliveryIDLen = 256
)

// Result is the outcome of a successful verification.
type Result struct {
	// DeliveryID is the provider's delivery id, for use as the idempotency
	// key when the request has none; "" when the scheme or request has none.
	DeliveryID string
	// Event is the provider's event name ({{event}}), "" when none.
	Event string
	// Challenge is set for a signed Slack url_verification request: answer
	// 200 {"challenge": Challenge} and do not dispatch. (Kept for callers
	// that do not call [Verifier.Handshake], which answers it too.)
	Challenge string
	// Payload, when not nil, is the JSON the mapping sees and forward mode
	// sends instead of the raw body: a form body as one object, a
	// decrypted body, an array body wrapped in an object.
	Payload []byte
	// Ack, when not nil, is the answer the provider expects once the
	// request is accepted (Discord's deferred interaction response,
	// Twilio's empty TwiML), instead of the edge's default.
	Ack *Answer
}

// scheme is one provider's verification, built by its Provider.build.
type scheme interface {
	// verify authenticates c's request. A failure is an *Error (401), a
	// *PayloadError (400) or an *UnavailableError (503).
	verify(c *call) error
}

// handshaker is a scheme with an endpoint handshake.
type handshaker interface {
	// handshake answers c's request when it is the provider's handshake:
	// (answer, nil), or (nil, err) when it is one but fails
	// authentication; (nil, errNotHandshake) otherwise.
	handshake(c *call) (*Answer, error)
}

// offerer is a scheme whose signature headers depend on its config (hmac).
type offerer interface {
	offered() []string
}

// Verifier checks requests against one Config. It is immutable after New
// (apart from a secret captured by a handshake, see Config.SecretFile) and
// safe for concurrent use. Formatting it never shows a secret.
type Verifier struct {
	name      string
	p         *Provider
	scheme    scheme
	nsecrets  int
	publicURL string
	// offered names the headers whose presence means a signature is
	// offered (canonical forms); empty when the credentials are in the
	// body.
	offered []string
}

// Env is what a Verifier may use from its host; the zero value is fine.
type Env struct {
	// HTTPClient fetches certificates, key sets and SNS confirmations
	// (only https URLs on allow-listed hosts, bounded in time and size);
	// nil uses a client with a 10 s timeout that follows no redirect.
	HTTPClient *http.Client
}

// New validates cfg and builds its Verifier. Errors name the offending
// field (e.g. "secrets[1]: shorter than 16 bytes") and never include a
// secret.
func New(cfg Config) (*Verifier, error) { return NewWithEnv(cfg, Env{}) }

// NewWithEnv is New with the host's Env.
func NewWithEnv(cfg Config, env Env) (*Verifier, error) {
	if cfg.Scheme == "" {
		return nil, fmt.Errorf("verify: scheme: required (a provider name such as github, stripe, slack, standard or hmac; `caddy hooks providers` lists all %d)", len(all()))
	}
	p := lookup(cfg.Scheme)
	if p == nil {
		return nil, unknownProvider(cfg.Scheme)
	}
	fail := func(err error) (*Verifier, error) { return nil, fmt.Errorf("verify %s: %w", cfg.Scheme, err) }
	if err := checkWords(&cfg, p); err != nil {
		return fail(err)
	}
	publicURL, err := checkPublicURL(cfg.PublicURL)
	if err != nil {
		return fail(err)
	}
	b := &builder{cfg: cfg, p: p, env: env}
	s, err := p.build(b)
	if err != nil {
		return fail(err)
	}
	v := &Verifier{name: p.Name, p: p, scheme: s, nsecrets: len(cfg.Secrets) + len(cfg.PublicKeys), publicURL: publicURL}
	if o, ok := s.(offerer); ok {
		v.offered = o.offered()
	} else if len(p.SignatureHeaders) > 0 {
		v.offered = p.SignatureHeaders[:1]
	}
	return v, nil
}

// Verify checks the request headers h and raw body of a POST at time now.
// A failure is an *Error; the caller answers 401. It is VerifyRequest for
// callers that have only the headers and the body.
func (v *Verifier) Verify(h http.Header, body []byte, now time.Time) (Result, error) {
	c := getCall(v, nil, now)
	c.req = Request{Header: h, Body: body}
	c.r = &c.req
	return v.run(c)
}

// VerifyRequest authenticates r at time now and returns what the provider
// says of it. A failure is an *Error (answer 401, counted by the lockout),
// a *PayloadError (the signature verified but the body is unusable: 400)
// or an *UnavailableError (a key could not be fetched: 503, not counted).
func (v *Verifier) VerifyRequest(r *Request, now time.Time) (Result, error) {
	return v.run(getCall(v, r, now))
}

// callPool recycles calls: a verification allocates none of its own.
var callPool = sync.Pool{New: func() any { return new(call) }}

// getCall returns a cleared call for r at now.
func getCall(v *Verifier, r *Request, now time.Time) *call {
	c := callPool.Get().(*call)
	c.v, c.r, c.now = v, r, now
	return c
}

// run verifies c, reads its result and recycles it.
func (v *Verifier) run(c *call) (Result, error) {
	res, err := Result{}, v.scheme.verify(c)
	if err == nil {
		res, err = v.result(c)
	}
	*c = call{}
	callPool.Put(c)
	return res, err
}

// result reads what a verified request says.
func (v *Verifier) result(c *call) (Result, error) {
	var res Result
	if v.p.Body != BodyJSON && c.r.isForm() {
		if _, err := c.parsedForm(); err != nil {
			return Result{}, &PayloadError{Reason: err.Error()}
		}
	}
	payload := c.json()
	if c.replaced {
		if payload == nil {
			return Result{}, &PayloadError{Reason: "no JSON payload"}
		}
		res.Payload = payload
	}
	res.Ack = v.p.Ack.clone()
	if v.p.ack != nil {
		res.Ack = v.p.ack(c)
	}
	res.DeliveryID = v.p.DeliveryID.deliveryID(c)
	res.Event = v.p.Event.event(c)
	if v.p.finish != nil {
		return v.p.finish(c, res)
	}
	return res, nil
}

// Handshake answers r when it is the provider's endpoint handshake (Meta's
// GET hub.challenge, Zoom's url_validation, Discord's PING, …): the caller
// sends the Answer and never dispatches. It returns (nil, nil) when r is
// not a handshake (go on: 405 for a method the mapping does not take,
// else VerifyRequest), and (nil, err) when r is a handshake that fails
// authentication (an *Error: 401, counted by the lockout) or could not be
// completed (*UnavailableError: 503). Call it before the method and token
// checks, after reading the body.
func (v *Verifier) Handshake(r *Request, now time.Time) (*Answer, error) {
	h, ok := v.scheme.(handshaker)
	if !ok {
		return nil, nil
	}
	a, err := h.handshake(&call{v: v, r: r, now: now})
	if err == errNotHandshake {
		return nil, nil
	}
	return a, err
}

// HandshakeMethods returns the methods other than POST the provider's
// handshake uses (GET, HEAD): the only ones the edge may take for this
// mapping, and only for the handshake.
func (v *Verifier) HandshakeMethods() []string { return slices.Clone(v.p.HandshakeMethods) }

// AcceptsForm reports whether the provider posts
// application/x-www-form-urlencoded bodies (the edge must not answer 415;
// Result.Payload carries the fields as one JSON object).
func (v *Verifier) AcceptsForm() bool { return v.p.Body != BodyJSON }

// PostsJSONAs reports whether the provider posts its JSON body with the
// media type mt (lower case, without parameters) besides application/json
// (Amazon SNS: text/plain).
func (v *Verifier) PostsJSONAs(mt string) bool { return slices.Contains(v.p.JSONTypes, mt) }

// Template returns the provider's default message template.
func (v *Verifier) Template() string { return v.p.Template }

// Info describes the Verifier's provider.
func (v *Verifier) Info() Info { return v.p.info() }

// Scheme returns the provider name the Verifier checks.
func (v *Verifier) Scheme() string { return v.name }

// String describes v without any secret.
func (v Verifier) String() string {
	return fmt.Sprintf("verify.Verifier{Scheme:%q Secrets:%d}", v.name, v.nsecrets)
}

// GoString describes v for %#v without any secret.
func (v Verifier) GoString() string { return v.String() }

// Offered reports, from the headers alone, whether h carries a signature
// for v's provider: nil when it does (or when the provider's credentials
// are in the body, which the headers cannot tell), else the *Error Verify
// would return. A request without one can be refused before its body is
// read.
func (v *Verifier) Offered(h http.Header) error {
	if len(v.offered) == 0 {
		return nil
	}
	for _, name := range v.offered {
		if vals := h[name]; len(vals) > 0 && trimOWS(vals[0]) != "" {
			return nil
		}
	}
	return fail(ReasonMissingSignature, v.offered[0])
}
