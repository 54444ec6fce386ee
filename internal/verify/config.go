package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyhook/caddyhook/internal/duration"
)

// Scheme names kept for callers that name the original five providers;
// every provider in the registry is accepted in [Config.Scheme] (see
// [Names]).
const (
	SchemeGitHub   = "github"
	SchemeStripe   = "stripe"
	SchemeSlack    = "slack"
	SchemeStandard = "standard"
	SchemeHMAC     = "hmac"
)

// Config is one verify block. Secret-bearing and file or URL fields are
// placeholder-expanded by the caller ([Config.Expand]); Layout is not a
// Caddy placeholder string and must be passed through unexpanded.
//
// Formatting a Config with %v, %+v, %#v never shows a secret: literal
// secrets (secrets, verify_token, client_state, encrypt_key) become
// "[REDACTED]", and only a value that is a single {env.*} or {file.*}
// placeholder (which names, but does not hold, a secret) is kept. Its JSON
// encoding is the config itself (what the Caddyfile adapter writes) and
// keeps the secrets as written: a literal is stored, and shown by Caddy's
// admin endpoint, in clear, so configs should name secrets by placeholder
// (the hooks handler warns about literals at provision).
//
// Every field but Scheme is optional in JSON; a provider rejects fields it
// does not read, naming them, and requires those it cannot work without.
type Config struct {
	// Scheme is the provider's name (see [Names]): github, stripe, slack,
	// standard, hmac, shopify, twilio, …
	Scheme string `json:"scheme"`
	// Secrets are the shared secrets, 1 to MaxSecrets; more than one lets
	// a rotation overlap. Each must be at least MinSecretLen bytes
	// (standard: the key decoded from whsec_<base64>). Surrounding
	// whitespace is trimmed.
	Secrets []string `json:"secrets,omitempty"`
	// Tolerance is the accepted clock difference, in both directions, for
	// schemes with a timestamp; 0 means the provider's default
	// (DefaultTolerance for most). In JSON it is either integer
	// nanoseconds or a Go duration string such as "5m".
	Tolerance time.Duration `json:"tolerance,omitempty"`
	// Header (hmac) names the header carrying the signature; for token
	// providers that let the sender choose, the header carrying the token.
	Header string `json:"header,omitempty"`
	// Prefix (hmac) precedes the encoded signature, e.g. "sha256=";
	// compared case-sensitively.
	Prefix string `json:"prefix,omitempty"`
	// Algorithm (hmac) is sha1, sha256 (default) or sha512.
	Algorithm string `json:"algorithm,omitempty"`
	// Encoding (hmac) of the signature: hex (default, either case) or
	// base64 (standard alphabet, padded).
	Encoding string `json:"encoding,omitempty"`
	// TimestampHeader (hmac) names a header holding the send time in unix
	// seconds. When set, Layout must sign {timestamp}, and the tolerance
	// applies.
	TimestampHeader string `json:"timestamp_header,omitempty"`
	// Layout (hmac) is the signed content: literal text plus the
	// placeholders {body} (required, once), {timestamp} (the
	// TimestampHeader value as sent) and {id} (the IDHeader value as
	// sent), each at most once. Default "{body}"; e.g. "{timestamp}.{body}".
	Layout string `json:"layout,omitempty"`
	// IDHeader (hmac) names an optional header holding the provider's
	// delivery id, returned as [Result.DeliveryID]. It is required in a
	// request when Layout signs {id}.
	IDHeader string `json:"id_header,omitempty"`
	// PublicKeys are the provider's public keys (Ed25519 or ECDSA P-256),
	// hex, base64 or PEM, 1 to MaxSecrets (a rotation overlap). They are
	// public: a literal is fine.
	PublicKeys []string `json:"public_keys,omitempty"`
	// VerifyToken is the token a handshake must echo (Meta's
	// hub.verify_token, Feishu's Verification Token). A secret.
	VerifyToken string `json:"verify_token,omitempty"`
	// PublicURL is the public origin (and optional path prefix) senders
	// call, for providers that sign the URL, when Caddy cannot see it
	// (TLS ended by a proxy that is not trusted, a rewritten path):
	// "https://hooks.example.com". The request's path and query follow it.
	PublicURL string `json:"public_url,omitempty"`
	// Audience is the expected JWT audience (Google Pub/Sub push: the
	// audience set on the subscription).
	Audience string `json:"audience,omitempty"`
	// JWKS is where a JWT provider's keys are: a file path or an https
	// URL on an allow-listed host; default the provider's own.
	JWKS string `json:"jwks,omitempty"`
	// ServiceAccount is the service account email a Google OIDC token must
	// name.
	ServiceAccount string `json:"service_account,omitempty"`
	// CertHosts replaces the provider's allow-list of hosts keys and
	// certificates may be fetched from: exact names or "*.suffix".
	CertHosts []string `json:"cert_hosts,omitempty"`
	// Topics are the SNS topic ARNs accepted (required for sns: a valid
	// SNS signature only proves the message came from some SNS topic).
	Topics []string `json:"topics,omitempty"`
	// ClientState is the secret a Microsoft Graph subscription echoes in
	// every notification.
	ClientState string `json:"client_state,omitempty"`
	// EncryptKey is Feishu/Lark's Encrypt Key: it signs and encrypts
	// events. A secret.
	EncryptKey string `json:"encrypt_key,omitempty"`
	// SecretFile is where a secret handed over in a handshake (Asana's
	// X-Hook-Secret, Notion's verification_token) is kept: written once,
	// mode 0600, by the first handshake when the file does not exist; read
	// at provision otherwise.
	SecretFile string `json:"secret_file,omitempty"`
}

// redacted replaces a literal secret wherever a Config is shown.
const redacted = "[REDACTED]"

// configFields is Config without its methods, for the JSON codec.
type configFields Config

// MarshalJSON encodes c as configured (secrets as written: see [Config]).
// Tolerance is encoded as integer nanoseconds, like caddy.Duration.
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(configFields(c))
}

// UnmarshalJSON decodes c strictly (unknown fields are errors), accepting
// tolerance as integer nanoseconds or a duration string.
func (c *Config) UnmarshalJSON(b []byte) error {
	var aux struct {
		*configFields
		Tolerance json.RawMessage `json:"tolerance,omitempty"`
	}
	aux.configFields = (*configFields)(c)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return fmt.Errorf("verify config: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("verify config: trailing data after object")
	}
	d, err := parseTolerance(aux.Tolerance)
	if err != nil {
		return fmt.Errorf("verify config: tolerance: %w", err)
	}
	c.Tolerance = d
	return nil
}

// parseTolerance decodes a JSON duration: absent, null, integer
// nanoseconds or a Go duration string.
func parseTolerance(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return duration.Parse(s)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want integer nanoseconds or a duration string")
	}
	return time.Duration(n), nil
}

// String describes c without any secret.
func (c Config) String() string {
	var b strings.Builder
	b.WriteString("verify.Config{Scheme:")
	b.WriteString(strconv.Quote(c.Scheme))
	fmt.Fprintf(&b, " Secrets:%q", redactSecrets(c.Secrets))
	if c.Tolerance != 0 {
		b.WriteString(" Tolerance:" + c.Tolerance.String())
	}
	for _, f := range []struct{ name, val string }{
		{"Header", c.Header}, {"Prefix", c.Prefix}, {"Algorithm", c.Algorithm},
		{"Encoding", c.Encoding}, {"TimestampHeader", c.TimestampHeader},
		{"Layout", c.Layout}, {"IDHeader", c.IDHeader},
		{"VerifyToken", redactOne(c.VerifyToken)}, {"PublicURL", c.PublicURL},
		{"Audience", c.Audience}, {"JWKS", c.JWKS}, {"ServiceAccount", c.ServiceAccount},
		{"ClientState", redactOne(c.ClientState)}, {"EncryptKey", redactOne(c.EncryptKey)},
		{"SecretFile", c.SecretFile},
	} {
		if f.val != "" {
			b.WriteString(" " + f.name + ":" + strconv.Quote(f.val))
		}
	}
	for _, f := range []struct {
		name string
		val  []string
	}{{"PublicKeys", c.PublicKeys}, {"CertHosts", c.CertHosts}, {"Topics", c.Topics}} {
		if len(f.val) > 0 {
			fmt.Fprintf(&b, " %s:%q", f.name, f.val)
		}
	}
	b.WriteString("}")
	return b.String()
}

// redactOne redacts one secret-bearing value ("" stays "").
func redactOne(s string) string {
	if s == "" {
		return ""
	}
	return redactSecrets([]string{s})[0]
}

// GoString describes c for %#v without any secret.
func (c Config) GoString() string { return c.String() }

// redactSecrets returns secrets with every literal value replaced by
// redacted; nil stays nil.
func redactSecrets(secrets []string) []string {
	if secrets == nil {
		return nil
	}
	out := make([]string, len(secrets))
	for i, s := range secrets {
		if IsSecretPlaceholder(s) {
			out[i] = strings.TrimSpace(s)
		} else {
			out[i] = redacted
		}
	}
	return out
}

// IsSecretPlaceholder reports whether s is exactly one {env.NAME} or
// {file.PATH} placeholder: a reference to a secret, not a secret.
func IsSecretPlaceholder(s string) bool {
	s = strings.TrimSpace(s)
	inner, ok := strings.CutPrefix(s, "{")
	if !ok {
		return false
	}
	inner, ok = strings.CutSuffix(inner, "}")
	if !ok || strings.ContainsAny(inner, "{} \t\r\n") {
		return false
	}
	name, ok := strings.CutPrefix(inner, "env.")
	if !ok {
		name, ok = strings.CutPrefix(inner, "file.")
	}
	return ok && name != ""
}

// SignatureHeaders names the request headers that carry c's credentials
// (canonical form): whoever reads them together with the body can replay
// a delivery, so they are kept out of access logs. Nil for an unknown
// provider.
func SignatureHeaders(c Config) []string {
	p := lookup(c.Scheme)
	if p == nil {
		return nil
	}
	out := slices.Clone(p.SignatureHeaders)
	if h := strings.TrimSpace(c.Header); h != "" && p.accepts("header") {
		if n, err := headerName("header", h); err == nil && !slices.Contains(out, n) {
			out = append([]string{n}, out...)
		}
	}
	return out
}

// Expand returns c with expand applied to every field that may hold a
// placeholder ({env.*}, {file.*}): the secrets, verify_token,
// client_state, encrypt_key, public keys, public_url, audience, jwks,
// service_account, secret_file and topics. Layout, prefix and header
// names are left as written.
func (c Config) Expand(expand func(string) string) Config {
	each := func(in []string) []string {
		if in == nil {
			return nil
		}
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = expand(s)
		}
		return out
	}
	c.Secrets, c.PublicKeys, c.Topics = each(c.Secrets), each(c.PublicKeys), each(c.Topics)
	for _, f := range []*string{&c.VerifyToken, &c.ClientState, &c.EncryptKey, &c.PublicURL,
		&c.Audience, &c.JWKS, &c.ServiceAccount, &c.SecretFile} {
		if *f != "" {
			*f = expand(*f)
		}
	}
	return c
}
