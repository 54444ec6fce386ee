package verify

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Family is how a provider authenticates its requests.
type Family string

// Provider families.
const (
	FamilyHMAC     Family = "hmac"     // a keyed hash of the request under a shared secret
	FamilyStandard Family = "standard" // Standard Webhooks (HMAC-SHA256 of id.timestamp.body)
	FamilyToken    Family = "token"    // a shared secret sent as is (header, basic auth or body field); the body is not signed
	FamilyEd25519  Family = "ed25519"  // an Ed25519 signature under the provider's public key
	FamilyECDSA    Family = "ecdsa"    // an ECDSA P-256 signature under the provider's public key
	FamilyX509     Family = "x509"     // an RSA signature under a certificate fetched from an allow-listed host
	FamilyJWT      Family = "jwt"      // a JSON Web Token (HS256 under the secret, or RS256/ES256 under a key set)
	FamilyDigest   Family = "digest"   // a plain hash over the body and a shared secret
)

// BodyKind is what a provider posts.
type BodyKind int

// Body kinds.
const (
	BodyJSON       BodyKind = iota // application/json
	BodyForm                       // application/x-www-form-urlencoded
	BodyJSONOrForm                 // either, by Content-Type
)

// String names k for the providers table.
func (k BodyKind) String() string {
	switch k {
	case BodyForm:
		return "form"
	case BodyJSONOrForm:
		return "JSON or form"
	case BodyJSON:
	}
	return "JSON"
}

// Provider is one entry of the registry: everything the edge knows about
// one sender. Each lives in its own provider_<name>.go file, registered by
// that file's init, with its vectors in provider_<name>_test.go.
type Provider struct {
	// Name is the word after `verify` (lower case, [a-z0-9_]).
	Name string
	// Title is the provider's name as people write it.
	Title string
	// Family is how requests are authenticated.
	Family Family
	// Signature describes, in one line, what is sent and what it covers.
	Signature string
	// Doc is the provider's documentation of the scheme.
	Doc string
	// Notes says which scheme is supported where the provider offers
	// several, and anything an operator must know.
	Notes string
	// Body is what the provider posts.
	Body BodyKind
	// JSONTypes are media types other than JSON's that the provider
	// posts its JSON body with (Amazon SNS: text/plain): the edge takes
	// them as JSON on its hook names.
	JSONTypes []string
	// FormJSONFields are form fields whose value is JSON, embedded as
	// such in the payload (Slack's payload).
	FormJSONFields []string
	// DropFields are top-level members removed from the payload the
	// mapping sees (a token sent in the body must not reach the agent).
	DropFields []string
	// ArrayMember, when set, names the member a JSON array body is
	// wrapped in ({"events": [...]}) so templates and the gateway, which
	// read objects, see it (SendGrid, HubSpot, Event Grid post arrays).
	ArrayMember string
	// SignatureHeaders are the headers carrying credentials: kept out of
	// access logs; the first present ones mean a signature is offered.
	SignatureHeaders []string
	// Handshake describes the endpoint handshake answered at the edge,
	// "" when the provider has none.
	Handshake string
	// HandshakeMethods are the methods other than POST the handshake uses
	// (GET, HEAD).
	HandshakeMethods []string
	// DeliveryID is where the delivery id is read (idempotency across
	// redeliveries).
	DeliveryID sources
	// Event is where the event name is read ({{event}}).
	Event sources
	// Template is the default message template for a mapping that sets
	// none.
	Template string
	// Tolerance is the default replay window where the provider signs a
	// time; 0 when it signs none.
	Tolerance time.Duration
	// Words are the verify block words the provider reads besides
	// tolerance (accepted when Tolerance is set).
	Words []string
	// Required are the words that must be set.
	Required []string
	// Ack, when set, is the answer to an accepted (dispatched) request in
	// the form the provider expects (Discord's deferred interaction
	// response, Twilio's empty TwiML) instead of the edge's default.
	Ack *Answer
	// SignsBody is false for token providers: the body is not
	// authenticated, only the sender.
	SignsBody bool

	build func(b *builder) (scheme, error)
	// ack, when set, chooses the acknowledgement per request (overrides Ack).
	ack func(c *call) *Answer
	// finish, when set, adjusts the Result of a verified request.
	finish func(c *call, r Result) (Result, error)
}

// registry holds every provider, by name; filled by the provider files'
// init functions and read-only afterwards.
var registry = struct {
	sync.Mutex
	byName map[string]*Provider
	sorted []*Provider
}{byName: map[string]*Provider{}}

// register adds p to the registry; a duplicate or malformed entry panics
// at init (a programming error caught by every test run).
func register(p *Provider) {
	registry.Lock()
	defer registry.Unlock()
	switch {
	case !validName(p.Name):
		panic(fmt.Sprintf("verify: provider name %q", p.Name))
	case registry.byName[p.Name] != nil:
		panic("verify: provider " + p.Name + " registered twice")
	case p.build == nil || p.Title == "" || p.Family == "" || p.Signature == "" || p.Doc == "":
		panic("verify: provider " + p.Name + " is incomplete")
	}
	for _, w := range append(slices.Clone(p.Words), p.Required...) {
		if findWord(w) == nil {
			panic("verify: provider " + p.Name + " names unknown word " + w)
		}
	}
	for i, h := range p.SignatureHeaders {
		p.SignatureHeaders[i] = mustHeader(h)
	}
	registry.byName[p.Name] = p
	registry.sorted = nil
}

// validName reports whether s is a provider name: [a-z0-9_], starting
// with a letter.
func validName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// mustHeader canonicalises a provider file's header constant.
func mustHeader(h string) string {
	n, err := headerName("header", h)
	if err != nil || n == "" {
		panic("verify: bad header constant " + h)
	}
	return n
}

// lookup returns the provider named name, nil when none.
func lookup(name string) *Provider {
	registry.Lock()
	defer registry.Unlock()
	return registry.byName[name]
}

// all returns the providers sorted by name.
func all() []*Provider {
	registry.Lock()
	defer registry.Unlock()
	if registry.sorted == nil {
		for _, p := range registry.byName {
			registry.sorted = append(registry.sorted, p)
		}
		sort.Slice(registry.sorted, func(i, j int) bool { return registry.sorted[i].Name < registry.sorted[j].Name })
	}
	return registry.sorted
}

// Names returns every provider name, sorted: the words `verify` accepts.
func Names() []string {
	ps := all()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// Suggest returns the provider name closest to name (at most two edits
// away), "" when none is close.
func Suggest(name string) string {
	best, bestD := "", 3
	lower := strings.ToLower(name)
	for _, n := range Names() {
		if d := editDistance(lower, n, bestD); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or max when it is
// at least max.
func editDistance(a, b string, max int) int {
	if d := len(a) - len(b); d >= max || -d >= max {
		return max
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], max)
}

// unknownProvider is New's error for a name not in the registry.
func unknownProvider(name string) error {
	if s := Suggest(name); s != "" {
		return fmt.Errorf("verify: scheme: unknown %q; did you mean %q? (`caddy hooks providers` lists all %d)", name, s, len(all()))
	}
	return fmt.Errorf("verify: scheme: unknown %q (`caddy hooks providers` lists all %d)", name, len(all()))
}

// Info describes one provider for `caddy hooks providers` and the README
// table; every field is plain text.
type Info struct {
	Name             string        `json:"name"`
	Title            string        `json:"title"`
	Family           Family        `json:"family"`
	Signature        string        `json:"signature"`
	Handshake        string        `json:"handshake,omitempty"`
	HandshakeMethods []string      `json:"handshake_methods,omitempty"`
	DeliveryID       string        `json:"delivery_id"`
	Event            string        `json:"event"`
	Body             string        `json:"body"`
	Template         string        `json:"template"`
	Tolerance        time.Duration `json:"tolerance,omitempty"`
	Words            []string      `json:"words"`
	Required         []string      `json:"required,omitempty"`
	SignsBody        bool          `json:"signs_body"`
	Doc              string        `json:"doc"`
	Notes            string        `json:"notes,omitempty"`
}

// Providers lists every provider, sorted by name.
func Providers() []Info {
	ps := all()
	out := make([]Info, len(ps))
	for i, p := range ps {
		out[i] = p.info()
	}
	return out
}

// Lookup describes the provider named name.
func Lookup(name string) (Info, bool) {
	p := lookup(name)
	if p == nil {
		return Info{}, false
	}
	return p.info(), true
}

// info describes p.
func (p *Provider) info() Info {
	return Info{
		Name: p.Name, Title: p.Title, Family: p.Family, Signature: p.Signature,
		Handshake: p.Handshake, HandshakeMethods: slices.Clone(p.HandshakeMethods),
		DeliveryID: p.DeliveryID.String(), Event: p.Event.String(), Body: p.Body.String(),
		Template: p.Template, Tolerance: p.Tolerance, Words: p.words(), Required: slices.Clone(p.Required),
		SignsBody: p.SignsBody, Doc: p.Doc, Notes: p.Notes,
	}
}

// words returns every word p accepts, in the order of [Words].
func (p *Provider) words() []string {
	var out []string
	for _, w := range allWords {
		if p.accepts(w.name) {
			out = append(out, w.name)
		}
	}
	return out
}

// accepts reports whether p reads word.
func (p *Provider) accepts(word string) bool {
	if word == "tolerance" && p.Tolerance > 0 {
		return true
	}
	return slices.Contains(p.Words, word) || slices.Contains(p.Required, word)
}
