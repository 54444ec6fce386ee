package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/tmpl"
)

// providerTests is what a provider's test file registers with
// providerTest: its vectors, its handshakes and, where the defaults do not
// fit, how to tamper with, strip or mis-key a request.
type providerTests struct {
	// vectors are signed requests that must verify (at least one).
	vectors []vector
	// handshakes are the provider's handshake requests (required when it
	// has one): answered, and refused when they fail authentication.
	handshakes []handshakeCase
	// tamper changes the signed content of a request (default: the last
	// letter or digit of the body rotated).
	tamper func(r *Request)
	// strip removes the credentials (default: every SignatureHeaders header).
	strip func(r *Request)
	// wrong returns cfg with other credentials (default: other secrets,
	// another public key of the same type).
	wrong func(t *testing.T, cfg Config) Config
	// env returns the Env the provider's Verifiers need (fetch stubs).
	env func(t *testing.T) Env
	// notes explains a default not applying (e.g. why a tampered body
	// is accepted); shown on failure.
	notes string
}

// vector is one signed request.
type vector struct {
	name string
	// source is "vector from <url>" (published by the provider) or
	// "computed from <url>: …" (built by the test from the documented
	// algorithm with a fixed secret).
	source string
	cfg    Config
	req    func() *Request
	now    time.Time
	// stale is a time at which the request is too old (zero: now +
	// tolerance + 1 minute).
	stale time.Time
	// want is compared on DeliveryID, Event and (when set) Payload.
	want Result
}

// handshakeCase is one handshake request.
type handshakeCase struct {
	name   string
	source string
	cfg    *Config // nil: the first vector's
	req    func() *Request
	now    time.Time
	// status and body are the expected answer; body "" is not compared
	// when bodyRE is set.
	status   int
	body     string
	bodyRE   string
	ctype    string // expected Content-Type prefix ("" = not compared)
	header   [2]string
	wantFail string // a Reason: the handshake is refused with it
	notHS    bool   // the request is not a handshake at all
}

// providerTestsByName holds every provider's tests.
var providerTestsByName = map[string]*providerTests{}

// providerTest registers a provider's tests (from its test file).
func providerTest(name string, pt providerTests) bool {
	if providerTestsByName[name] != nil {
		panic("provider tests registered twice: " + name)
	}
	providerTestsByName[name] = &pt
	return true
}

// hookURL is the public URL of the test requests.
const hookURL = "https://hooks.example.com/hooks/p"

// req returns a request generator: method, absolute URL, body, header pairs.
func req(method, rawURL, body string, kv ...string) func() *Request {
	return func() *Request {
		u, err := url.Parse(rawURL)
		if err != nil {
			panic(err)
		}
		return &Request{
			Method: method, URL: &url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery},
			Host: u.Host, TLS: u.Scheme == "https", Header: hdr(kv...), Body: []byte(body),
		}
	}
}

// post is req for a POST to hookURL.
func post(body string, kv ...string) func() *Request { return req("POST", hookURL, body, kv...) }

// sourceRE is what a vector's source must say.
var sourceRE = regexp.MustCompile(`^(vector from https://\S+|computed from https://\S+: .+)`)

// TestProviders runs every provider's vectors, handshakes and the four
// refusals (tampered body, wrong secret, stale timestamp where signed,
// missing credentials), and fails for a provider without them.
func TestProviders(t *testing.T) {
	ps := all()
	if len(ps) < 50 {
		t.Errorf("%d providers, want at least 50", len(ps))
	}
	for _, p := range ps {
		t.Run(p.Name, func(t *testing.T) {
			pt := providerTestsByName[p.Name]
			if pt == nil || len(pt.vectors) == 0 {
				t.Fatalf("provider %s has no test vector (register one in provider_%s_test.go)", p.Name, p.Name)
			}
			if p.Handshake != "" && !hasAnswered(pt.handshakes) {
				t.Fatalf("provider %s has a handshake but no handshake test", p.Name)
			}
			env := Env{}
			if pt.env != nil {
				env = pt.env(t)
			}
			for _, vec := range pt.vectors {
				t.Run(vec.name, func(t *testing.T) { runVector(t, p, env, vec) })
			}
			first := pt.vectors[0]
			if len(p.DeliveryID) > 0 && first.want.DeliveryID == "" {
				t.Errorf("first vector shows no delivery id though the provider reads one (%s)", p.DeliveryID)
			}
			if len(p.Event) > 0 && first.want.Event == "" {
				t.Errorf("first vector shows no event though the provider reads one (%s)", p.Event)
			}
			t.Run("refusals", func(t *testing.T) { runRefusals(t, p, pt, env, first) })
			for _, hc := range pt.handshakes {
				t.Run("handshake/"+hc.name, func(t *testing.T) { runHandshake(t, env, first, hc) })
			}
			t.Run("template", func(t *testing.T) { checkTemplate(t, p, env, pt.vectors) })
		})
	}
	for name := range providerTestsByName {
		if lookup(name) == nil {
			t.Errorf("tests registered for unknown provider %s", name)
		}
	}
}

// hasAnswered reports whether some handshake case expects an answer.
func hasAnswered(hcs []handshakeCase) bool {
	for _, hc := range hcs {
		if hc.wantFail == "" && !hc.notHS {
			return true
		}
	}
	return false
}

// runVector verifies one vector.
func runVector(t *testing.T, p *Provider, env Env, vec vector) {
	if !sourceRE.MatchString(vec.source) {
		t.Fatalf("source %q: want \"vector from <url>\" or \"computed from <url>: …\"", vec.source)
	}
	v, err := NewWithEnv(vec.cfg, env)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := vec.req()
	if a, err := v.Handshake(r, vec.now); a != nil || err != nil {
		t.Fatalf("an ordinary request taken for a handshake: %+v, %v", a, err)
	}
	got, err := v.VerifyRequest(vec.req(), vec.now)
	if err != nil {
		t.Fatalf("VerifyRequest: %v", err)
	}
	if got.DeliveryID != vec.want.DeliveryID || got.Event != vec.want.Event {
		t.Fatalf("delivery id, event = %q, %q; want %q, %q", got.DeliveryID, got.Event, vec.want.DeliveryID, vec.want.Event)
	}
	if vec.want.Payload != nil && string(got.Payload) != string(vec.want.Payload) {
		t.Fatalf("payload = %s\nwant %s", got.Payload, vec.want.Payload)
	}
	if p.Body == BodyJSON && got.Payload != nil && vec.want.Payload == nil {
		t.Fatalf("a JSON provider replaced the payload unexpectedly: %s", got.Payload)
	}
}

// runRefusals checks the four refusals on the first vector.
func runRefusals(t *testing.T, p *Provider, pt *providerTests, env Env, vec vector) {
	v, err := NewWithEnv(vec.cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(t *testing.T, r *Request, now time.Time, reasons ...string) {
		t.Helper()
		res, err := v.VerifyRequest(r, now)
		var ve *Error
		if !errors.As(err, &ve) {
			t.Fatalf("VerifyRequest = %+v, %v; want an *Error %v (%s)", res, err, reasons, pt.notes)
		}
		if len(reasons) > 0 && !contains(reasons, ve.Reason) {
			t.Fatalf("reason %q, want one of %q", ve.Reason, reasons)
		}
	}
	t.Run("tampered body", func(t *testing.T) {
		r := vec.req()
		tamper := pt.tamper
		if tamper == nil {
			tamper = rotateLastAlnum
		}
		tamper(r)
		if !p.SignsBody {
			if _, err := v.VerifyRequest(r, vec.now); err != nil {
				t.Fatalf("a token provider refused a changed body: %v", err)
			}
			return
		}
		refused(t, r, vec.now)
	})
	t.Run("wrong secret", func(t *testing.T) {
		wrong := pt.wrong
		if wrong == nil {
			wrong = defaultWrong
		}
		wv, err := NewWithEnv(wrong(t, vec.cfg), env)
		if err != nil {
			t.Fatalf("New with other credentials: %v", err)
		}
		res, err := wv.VerifyRequest(vec.req(), vec.now)
		var ve *Error
		if !errors.As(err, &ve) {
			t.Fatalf("other credentials: %+v, %v; want an *Error", res, err)
		}
	})
	t.Run("stale", func(t *testing.T) {
		if p.Tolerance == 0 {
			t.Skip("the provider signs no time")
		}
		at := vec.stale
		if at.IsZero() {
			tol := p.Tolerance
			if vec.cfg.Tolerance > 0 {
				tol = vec.cfg.Tolerance
			}
			at = vec.now.Add(tol + time.Minute)
		}
		refused(t, vec.req(), at, ReasonStaleTimestamp)
		if vec.stale.IsZero() {
			refused(t, vec.req(), vec.now.Add(-(p.Tolerance + 3*DefaultTolerance + time.Hour)), ReasonStaleTimestamp)
		}
	})
	t.Run("missing credentials", func(t *testing.T) {
		r := vec.req()
		strip := pt.strip
		if strip == nil {
			strip = func(r *Request) {
				for _, h := range p.SignatureHeaders {
					r.Header.Del(h)
				}
			}
		}
		strip(r)
		refused(t, r, vec.now, ReasonMissingSignature, ReasonMissingTimestamp, ReasonMalformedBody, ReasonMissingID)
		if p.Family != FamilyX509 && len(p.SignatureHeaders) > 0 {
			if err := v.Offered(r.Header); err == nil && len(v.offered) > 0 {
				t.Fatalf("Offered accepted a request without credentials")
			}
			if err := v.Offered(vec.req().Header); err != nil {
				t.Fatalf("Offered refused the vector: %v", err)
			}
		}
	})
}

// runHandshake checks one handshake case.
func runHandshake(t *testing.T, env Env, vec vector, hc handshakeCase) {
	if hc.source != "" && !sourceRE.MatchString(hc.source) {
		t.Fatalf("source %q", hc.source)
	}
	cfg := vec.cfg
	if hc.cfg != nil {
		cfg = *hc.cfg
	}
	v, err := NewWithEnv(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	now := hc.now
	if now.IsZero() {
		now = vec.now
	}
	a, err := v.Handshake(hc.req(), now)
	switch {
	case hc.notHS:
		if a != nil || err != nil {
			t.Fatalf("Handshake = %+v, %v; want not a handshake", a, err)
		}
		return
	case hc.wantFail != "":
		var ve *Error
		if !errors.As(err, &ve) || ve.Reason != hc.wantFail {
			t.Fatalf("Handshake = %+v, %v; want refused: %s", a, err, hc.wantFail)
		}
		return
	case err != nil || a == nil:
		t.Fatalf("Handshake = %+v, %v; want an answer", a, err)
	}
	if a.Status != hc.status {
		t.Fatalf("status %d, want %d", a.Status, hc.status)
	}
	if hc.bodyRE != "" {
		if !regexp.MustCompile(hc.bodyRE).Match(a.Body) {
			t.Fatalf("body %q does not match %s", a.Body, hc.bodyRE)
		}
	} else if string(a.Body) != hc.body {
		t.Fatalf("body %q, want %q", a.Body, hc.body)
	}
	if hc.ctype != "" && !strings.HasPrefix(a.Header.Get("Content-Type"), hc.ctype) {
		t.Fatalf("Content-Type %q, want %s", a.Header.Get("Content-Type"), hc.ctype)
	}
	if hc.header[0] != "" && a.Header.Get(hc.header[0]) != hc.header[1] {
		t.Fatalf("%s: %q, want %q", hc.header[0], a.Header.Get(hc.header[0]), hc.header[1])
	}
	if a.What == "" {
		t.Fatal("answer without What")
	}
}

// checkTemplate compiles the default template and checks that each group
// of adjacent placeholders (alternatives such as
// "{{payload.text}}{{payload.event.text}}") resolves to something in some
// vector: the template reads fields the provider really sends.
func checkTemplate(t *testing.T, p *Provider, env Env, vecs []vector) {
	if p.Template == "" {
		t.Fatal("no default template")
	}
	groups := placeholderGroups(p.Template)
	if len(groups) == 0 {
		t.Fatal("the default template reads nothing")
	}
	var payloads []map[string]any
	var events []string
	var headers []map[string]string
	for _, vec := range vecs {
		v, err := NewWithEnv(vec.cfg, env)
		if err != nil {
			t.Fatal(err)
		}
		r := vec.req()
		res, err := v.VerifyRequest(r, vec.now)
		if err != nil {
			t.Fatal(err)
		}
		doc := res.Payload
		if doc == nil {
			doc = r.Body
		}
		var m map[string]any
		_ = json.Unmarshal(doc, &m)
		payloads = append(payloads, m)
		events = append(events, res.Event)
		hm := map[string]string{}
		for k, vs := range r.Header {
			hm[strings.ToLower(k)] = strings.Join(vs, ", ")
		}
		headers = append(headers, hm)
	}
	for _, g := range groups {
		ok := false
		for i, m := range payloads {
			for _, ph := range g {
				if ph == "event" {
					ok = ok || events[i] != ""
					continue
				}
				src := "{{" + ph + "}}"
				tp, err := tmpl.Compile(src, nil)
				if err != nil {
					t.Fatalf("template %q: %v", p.Template, err)
				}
				out, err := tp.RenderString(&tmpl.Vars{Payload: m, Headers: headers[i]})
				if err == nil && out != "" {
					ok = true
				}
			}
		}
		if !ok {
			t.Errorf("template %q: %v resolves in no vector", p.Template, g)
		}
	}
	if _, err := tmpl.Compile(p.Template, nil); err != nil {
		t.Fatalf("template %q: %v", p.Template, err)
	}
}

// placeholderGroups splits a template into groups of adjacent placeholders.
func placeholderGroups(src string) [][]string {
	var groups [][]string
	adjacent := false
	for {
		i := strings.Index(src, "{{")
		if i < 0 {
			return groups
		}
		j := strings.Index(src[i:], "}}")
		if j < 0 {
			return groups
		}
		ph := strings.TrimSpace(src[i+2 : i+j])
		if i == 0 && adjacent {
			groups[len(groups)-1] = append(groups[len(groups)-1], ph)
		} else {
			groups = append(groups, []string{ph})
		}
		src = src[i+j+2:]
		adjacent = true
	}
}

// rotateLastAlnum changes the last letter or digit of the body.
func rotateLastAlnum(r *Request) {
	b := []byte(string(r.Body))
	for i := len(b) - 1; i >= 0; i-- {
		c := b[i]
		switch {
		case c >= '0' && c <= '8', c >= 'a' && c <= 'y', c >= 'A' && c <= 'Y':
			b[i] = c + 1
		case c == '9':
			b[i] = '0'
		case c == 'z':
			b[i] = 'a'
		case c == 'Z':
			b[i] = 'A'
		default:
			continue
		}
		r.Body = b
		return
	}
	r.Body = append(b, ' ')
}

// Other credentials for the "wrong secret" refusal.
var (
	otherEd25519 = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	otherP256    = fixedP256(7)
)

// fixedP256 is a deterministic P-256 key for tests.
func fixedP256(d int64) *ecdsa.PrivateKey {
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), new(big.Int).SetInt64(d).FillBytes(make([]byte, 32)))
	if err != nil {
		panic(err)
	}
	return k
}

// pkixB64 is the base64 DER SubjectPublicKeyInfo of pub.
func pkixB64(pub any) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(der)
}

// defaultWrong replaces the secrets and public keys of cfg by others.
func defaultWrong(t *testing.T, cfg Config) Config {
	if len(cfg.Secrets) > 0 {
		other := otherSecret
		if strings.HasPrefix(cfg.Secrets[0], "whsec_") {
			other = "whsec_" + base64.StdEncoding.EncodeToString([]byte(otherSecret))
		}
		cfg.Secrets = []string{other}
	}
	if len(cfg.PublicKeys) > 0 {
		k, err := ParsePublicKey(cfg.PublicKeys[0])
		if err != nil {
			t.Fatal(err)
		}
		switch k.(type) {
		case ed25519.PublicKey:
			cfg.PublicKeys = []string{pkixB64(otherEd25519.Public())}
		default:
			cfg.PublicKeys = []string{pkixB64(otherP256.Public())}
		}
	}
	return cfg
}

// TestProviderEntries checks every entry's declarations.
func TestProviderEntries(t *testing.T) {
	for _, p := range all() {
		if !strings.HasPrefix(p.Doc, "https://") {
			t.Errorf("%s: Doc %q is not an https URL", p.Name, p.Doc)
		}
		if p.Family == FamilyToken && p.SignsBody {
			t.Errorf("%s: a token provider cannot sign the body", p.Name)
		}
		if p.Family != FamilyToken && !p.SignsBody && !strings.Contains(p.Notes, "body is not signed") {
			t.Errorf("%s: SignsBody false for family %s without saying so in Notes (\"the body is not signed\")", p.Name, p.Family)
		}
		if len(p.Required) == 0 && !contains(p.Words, "secret_file") {
			t.Errorf("%s: requires no credential", p.Name)
		}
		for _, m := range p.HandshakeMethods {
			if m != http.MethodGet && m != http.MethodHead {
				t.Errorf("%s: handshake method %s", p.Name, m)
			}
		}
		if len(p.HandshakeMethods) > 0 && p.Handshake == "" {
			t.Errorf("%s: handshake methods without a handshake", p.Name)
		}
		if p.Body == BodyJSON && len(p.FormJSONFields) > 0 {
			t.Errorf("%s: form JSON fields on a JSON provider", p.Name)
		}
		if p.Ack != nil && (p.Ack.Status < 200 || p.Ack.Status > 299 || p.Ack.What == "") {
			t.Errorf("%s: ack %+v", p.Name, p.Ack)
		}
	}
}

// ensure fmt is used by helpers in provider test files.
var _ = fmt.Sprintf
