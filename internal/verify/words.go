package verify

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caddyhook/caddyhook/internal/duration"
)

// Word is one subdirective of a `verify <provider> { … }` block: the
// Caddyfile parser is driven by this table and [Config.SetWord].
type Word struct {
	// Name is the subdirective and, in JSON, names the field (see Field).
	Name string
	// Field is the Config JSON member the word sets.
	Field string
	// Repeat means the word may appear several times (and take several
	// values on one line), each appended.
	Repeat bool
	// Secret means the value is a secret: give it as a placeholder.
	Secret bool
	// Doc says what the word is, in one line.
	Doc string
}

// word is a Word with its accessors.
type word struct {
	Word
	name  string
	isSet func(c *Config) bool
	set   func(c *Config, args []string) error
}

// str is a single-valued string word.
func str(name, field string, secret bool, doc string, ptr func(c *Config) *string) word {
	return word{
		Word: Word{Name: name, Field: field, Secret: secret, Doc: doc}, name: name,
		isSet: func(c *Config) bool { return *ptr(c) != "" },
		set: func(c *Config, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%s: takes exactly one value", name)
			}
			*ptr(c) = args[0]
			return nil
		},
	}
}

// list is a repeatable string word.
func list(name, field string, secret bool, doc string, ptr func(c *Config) *[]string) word {
	return word{
		Word: Word{Name: name, Field: field, Repeat: true, Secret: secret, Doc: doc}, name: name,
		isSet: func(c *Config) bool { return len(*ptr(c)) > 0 },
		set: func(c *Config, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("%s needs a value", name)
			}
			*ptr(c) = append(*ptr(c), args...)
			return nil
		},
	}
}

// allWords is every verify block word, in documentation order.
var allWords = []word{
	list("secret", "secrets", true, "a shared secret; repeat to accept several during a rotation", func(c *Config) *[]string { return &c.Secrets }),
	{
		Word: Word{Name: "tolerance", Field: "tolerance", Doc: "the accepted clock difference for signed times (both directions)"}, name: "tolerance",
		isSet: func(c *Config) bool { return c.Tolerance != 0 },
		set: func(c *Config, args []string) error {
			if len(args) != 1 {
				return errors.New("tolerance: takes exactly one value")
			}
			d, err := parseDuration(args[0])
			if err != nil {
				return fmt.Errorf("tolerance %q: %v", args[0], err)
			}
			c.Tolerance = d
			return nil
		},
	},
	list("public_key", "public_keys", false, "the provider's public key (Ed25519 or ECDSA P-256; hex, base64 or PEM); repeat during a rotation", func(c *Config) *[]string { return &c.PublicKeys }),
	str("verify_token", "verify_token", true, "the token the provider's handshake must carry (Meta hub.verify_token, Feishu Verification Token)", func(c *Config) *string { return &c.VerifyToken }),
	str("public_url", "public_url", false, "the public origin (and path prefix) the provider calls, when Caddy cannot see it", func(c *Config) *string { return &c.PublicURL }),
	str("audience", "audience", false, "the JWT audience the provider's token must carry", func(c *Config) *string { return &c.Audience }),
	str("jwks", "jwks", false, "the key set: a file path or an https URL on an allow-listed host", func(c *Config) *string { return &c.JWKS }),
	str("service_account", "service_account", false, "the service account email the token must name", func(c *Config) *string { return &c.ServiceAccount }),
	list("cert_hosts", "cert_hosts", false, "hosts keys and certificates may be fetched from (exact or *.suffix), replacing the provider's", func(c *Config) *[]string { return &c.CertHosts }),
	list("topic", "topics", false, "an accepted topic ARN; repeat for several", func(c *Config) *[]string { return &c.Topics }),
	str("client_state", "client_state", true, "the clientState secret of the subscription", func(c *Config) *string { return &c.ClientState }),
	str("encrypt_key", "encrypt_key", true, "the Encrypt Key that signs and encrypts events", func(c *Config) *string { return &c.EncryptKey }),
	str("secret_file", "secret_file", false, "the file keeping the secret the handshake hands over (written once, 0600)", func(c *Config) *string { return &c.SecretFile }),
	str("header", "header", false, "the header carrying the signature or token", func(c *Config) *string { return &c.Header }),
	str("prefix", "prefix", false, "text before the encoded signature (hmac)", func(c *Config) *string { return &c.Prefix }),
	str("algorithm", "algorithm", false, "sha1, sha256 or sha512 (hmac)", func(c *Config) *string { return &c.Algorithm }),
	str("encoding", "encoding", false, "hex or base64 (hmac)", func(c *Config) *string { return &c.Encoding }),
	str("timestamp_header", "timestamp_header", false, "the header with the signed unix time (hmac)", func(c *Config) *string { return &c.TimestampHeader }),
	str("layout", "layout", false, "the signed content, e.g. {timestamp}.{body} (hmac)", func(c *Config) *string { return &c.Layout }),
	str("id_header", "id_header", false, "the header with the delivery id (hmac)", func(c *Config) *string { return &c.IDHeader }),
}

// label names w for errors: the Caddyfile word, and the JSON field when
// it is spelled otherwise.
func (w *word) label() string {
	if w.Field == w.name {
		return w.name
	}
	return w.name + " (JSON " + w.Field + ")"
}

// findWord returns the word named name, nil when none.
func findWord(name string) *word {
	for i := range allWords {
		if allWords[i].name == name {
			return &allWords[i]
		}
	}
	return nil
}

// Words lists every verify block word, in documentation order.
func Words() []Word {
	out := make([]Word, len(allWords))
	for i, w := range allWords {
		out[i] = w.Word
	}
	return out
}

// SetWord applies one verify block line `name args…` to c: repeatable
// words append, others take exactly one value. An unknown word fails
// naming it; whether the provider reads the word is checked by [New].
func (c *Config) SetWord(name string, args []string) error {
	w := findWord(name)
	if w == nil {
		return fmt.Errorf("unrecognized verify subdirective '%s'", name)
	}
	return w.set(c, args)
}

// parseDuration parses a duration as Caddy does (Go's units and d for
// days, "1d"); its error names the units.
func parseDuration(s string) (time.Duration, error) { return duration.Parse(s) }

// checkWords fails when cfg sets a word p does not read, or misses one p
// requires; errors name the word.
func checkWords(cfg *Config, p *Provider) error {
	for _, w := range allWords {
		if w.isSet(cfg) && !p.accepts(w.name) {
			if w.name == "tolerance" {
				return fmt.Errorf("tolerance: %s signatures carry no timestamp", p.Name)
			}
			return fmt.Errorf("%s: not read by verify %s (it reads: %s)", w.label(), p.Name, strings.Join(p.words(), ", "))
		}
	}
	for _, r := range p.Required {
		if w := findWord(r); w != nil && !w.isSet(cfg) {
			if r == "secret" {
				return errors.New("secrets: at least one secret is required")
			}
			return fmt.Errorf("%s: required by verify %s", w.label(), p.Name)
		}
	}
	return nil
}
