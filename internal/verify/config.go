package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// Scheme names accepted in [Config.Scheme].
const (
	SchemeGitHub   = "github"
	SchemeStripe   = "stripe"
	SchemeSlack    = "slack"
	SchemeStandard = "standard"
	SchemeHMAC     = "hmac"
)

// Config is one verify block. Secrets are already placeholder-expanded by
// the caller; Layout is not a Caddy placeholder string and must be passed
// through unexpanded.
//
// Formatting a Config with %v, %+v, %#v never shows a secret: literal
// secrets become "[REDACTED]", and only a value that is a single {env.*}
// or {file.*} placeholder (which names, but does not hold, a secret) is
// kept. Its JSON encoding is the config itself (what the Caddyfile adapter
// writes) and keeps the secrets as written: a literal is stored, and shown
// by Caddy's admin endpoint, in clear, so configs should name secrets by
// placeholder (the hooks handler warns about literals at provision).
type Config struct {
	// Scheme is github, stripe, slack, standard or hmac.
	Scheme string `json:"scheme"`
	// Secrets are the signing secrets, 1 to MaxSecrets; more than one lets
	// a rotation overlap. Each must be at least MinSecretLen bytes
	// (standard: the key decoded from whsec_<base64>). Surrounding
	// whitespace is trimmed.
	Secrets []string `json:"secrets,omitempty"`
	// Tolerance is the accepted clock difference, in both directions, for
	// schemes with a timestamp; 0 means DefaultTolerance. In JSON it is
	// either integer nanoseconds or a Go duration string such as "5m".
	Tolerance time.Duration `json:"tolerance,omitempty"`
	// Header (hmac) names the header carrying the signature.
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
		return time.ParseDuration(s)
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
	} {
		if f.val != "" {
			b.WriteString(" " + f.name + ":" + strconv.Quote(f.val))
		}
	}
	b.WriteString("}")
	return b.String()
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

// SignatureHeaders names the request headers that carry c's signatures
// (canonical form): whoever reads them together with the body can replay
// a delivery, so they are kept out of access logs.
func SignatureHeaders(c Config) []string {
	switch c.Scheme {
	case SchemeGitHub:
		return []string{githubSignatureHeader, "X-Hub-Signature"}
	case SchemeStripe:
		return []string{stripeSignatureHeader}
	case SchemeSlack:
		return []string{slackSignatureHeader}
	case SchemeStandard:
		return []string{webhookSignatureHeader, svixSignatureHeader}
	case SchemeHMAC:
		if h := strings.TrimSpace(c.Header); h != "" {
			return []string{textproto.CanonicalMIMEHeaderKey(h)}
		}
	}
	return nil
}
