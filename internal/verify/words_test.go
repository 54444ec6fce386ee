package verify

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSetWord drives a Config from verify block lines, as the Caddyfile
// parser does.
func TestSetWord(t *testing.T) {
	var c Config
	for _, line := range [][]string{
		{"secret", "{env.A}", "{env.B}"}, {"secret", "{env.C}"}, {"tolerance", "90s"},
		{"public_key", "abcd"}, {"verify_token", "{env.VT}"}, {"public_url", "https://h.example"},
		{"audience", "aud"}, {"jwks", "/etc/jwks.json"}, {"service_account", "sa@x"},
		{"cert_hosts", "a.example", "*.b.example"}, {"topic", "arn:aws:sns:r:1:t"},
		{"client_state", "{env.CS}"}, {"encrypt_key", "{env.EK}"}, {"secret_file", "/var/lib/s"},
		{"header", "X-Sig"}, {"prefix", "p="}, {"algorithm", "sha1"}, {"encoding", "base64"},
		{"timestamp_header", "X-Ts"}, {"layout", "{timestamp}.{body}"}, {"id_header", "X-Id"},
	} {
		if err := c.SetWord(line[0], line[1:]); err != nil {
			t.Fatalf("%v: %v", line, err)
		}
	}
	want := Config{Secrets: []string{"{env.A}", "{env.B}", "{env.C}"}, Tolerance: 90 * time.Second,
		PublicKeys: []string{"abcd"}, VerifyToken: "{env.VT}", PublicURL: "https://h.example", Audience: "aud",
		JWKS: "/etc/jwks.json", ServiceAccount: "sa@x", CertHosts: []string{"a.example", "*.b.example"},
		Topics: []string{"arn:aws:sns:r:1:t"}, ClientState: "{env.CS}", EncryptKey: "{env.EK}", SecretFile: "/var/lib/s",
		Header: "X-Sig", Prefix: "p=", Algorithm: "sha1", Encoding: "base64", TimestampHeader: "X-Ts",
		Layout: "{timestamp}.{body}", IDHeader: "X-Id"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("SetWord built %+v\nwant %+v", fieldsOf(c), fieldsOf(want))
	}
	for _, tc := range []struct {
		line []string
		want string
	}{
		{[]string{"secret"}, "secret needs a value"},
		{[]string{"tolerance", "soon"}, `tolerance "soon"`},
		{[]string{"tolerance", "1m", "2m"}, "tolerance: takes exactly one value"},
		{[]string{"audience"}, "audience: takes exactly one value"},
		{[]string{"nope", "x"}, "unrecognized verify subdirective 'nope'"},
	} {
		var c Config
		if err := c.SetWord(tc.line[0], tc.line[1:]); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetWord(%v) = %v, want %q", tc.line, err, tc.want)
		}
	}
	if d, err := parseDuration("2d"); err != nil || d != 48*time.Hour {
		t.Fatalf("2d = %v, %v", d, err)
	}
	// every word sets a JSON field of Config, once
	seen := map[string]bool{}
	for _, w := range Words() {
		if seen[w.Field] {
			t.Errorf("field %s set by two words", w.Field)
		}
		seen[w.Field] = true
		if !strings.Contains(configJSONFields(), `"`+w.Field+`"`) {
			t.Errorf("word %s names unknown field %s", w.Name, w.Field)
		}
	}
}

// configJSONFields lists Config's JSON member names.
func configJSONFields() string {
	typ := reflect.TypeOf(Config{})
	var names []string
	for i := range typ.NumField() {
		names = append(names, `"`+strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]+`"`)
	}
	return strings.Join(names, " ")
}

// TestWordsPerProvider: a word a provider does not read fails New naming
// it; a required one missing fails naming it.
func TestWordsPerProvider(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Scheme: "github", Secrets: []string{genericSecret}, PublicKeys: []string{"ab"}}, "public_key (JSON public_keys): not read by verify github (it reads: secret)"},
		{Config{Scheme: "discord"}, "public_key (JSON public_keys): required by verify discord"},
		{Config{Scheme: "discord", PublicKeys: []string{"z!"}}, "public_keys[0]: not hex, base64 or PEM"},
		{Config{Scheme: "discord", PublicKeys: []string{pkixB64(otherP256.Public())}}, "public_keys[0]: an ECDSA P-256 key; Discord (interactions and webhook events) signs with Ed25519"},
		{Config{Scheme: "sendgrid", PublicKeys: []string{pkixB64(otherEd25519.Public())}}, "public_keys[0]: an Ed25519 key; SendGrid Event Webhook signs with ECDSA P-256"},
		{Config{Scheme: "sendgrid", PublicKeys: []string{"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"}}, "public_keys[0]: PEM PUBLIC KEY does not parse"},
		{Config{Scheme: "sendgrid", PublicKeys: []string{"-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----"}}, `public_keys[0]: PEM block "RSA PRIVATE KEY"`},
		{Config{Scheme: "sendgrid", PublicKeys: []string{"{env.SG_KEY}"}}, "public_keys[0]: placeholder was not expanded"},
		{Config{Scheme: "meta", Secrets: []string{genericSecret}}, "verify_token: required by verify meta"},
		{Config{Scheme: "meta", Secrets: []string{genericSecret}, VerifyToken: "short"}, "verify_token: shorter than 8 bytes"},
		{Config{Scheme: "msgraph", ClientState: "{env.CS}"}, "client_state: placeholder was not expanded"},
		{Config{Scheme: "square", Secrets: []string{genericSecret}, PublicURL: "ftp://x"}, "public_url: \"ftp://x\": the scheme must be https or http"},
		{Config{Scheme: "square", Secrets: []string{genericSecret}, PublicURL: "https://x/?a=1"}, "public_url: \"https://x/?a=1\": only scheme, host"},
		{Config{Scheme: "grafana", Secrets: []string{genericSecret}, Tolerance: time.Minute}, "tolerance: needs timestamp_header"},
		{Config{Scheme: "feishu", VerifyToken: "token-123", Tolerance: time.Minute}, "tolerance: needs encrypt_key"},
		{Config{Scheme: "asana", Secrets: []string{genericSecret, genericSecret}}, "secrets: exactly one"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// TestConfigJSONNewFields: the new fields round-trip, secrets stay out of
// String, and Expand reaches every placeholder-bearing field but layout.
func TestConfigJSONNewFields(t *testing.T) {
	in := `{"scheme":"sns","public_keys":["k"],"verify_token":"{env.VT}","public_url":"https://h","audience":"a","jwks":"/j","service_account":"s","cert_hosts":["c"],"topics":["t"],"client_state":"literal-state","encrypt_key":"{env.EK}","secret_file":"/f","layout":"{env.X}"}`
	var c Config
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	json.Unmarshal([]byte(in), &a)
	json.Unmarshal(out, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip %s\nwant %s", out, in)
	}
	s := fmt.Sprintf("%v %+v %#v", c, c, c)
	if strings.Contains(s, "literal-state") || !strings.Contains(s, `ClientState:"[REDACTED]"`) || !strings.Contains(s, `VerifyToken:"{env.VT}"`) {
		t.Fatalf("String: %s", s)
	}
	e := c.Expand(func(v string) string { return strings.ReplaceAll(v, "{env.", "<") })
	if e.VerifyToken != "<VT}" || e.EncryptKey != "<EK}" || e.Layout != "{env.X}" || e.PublicKeys[0] != "k" {
		t.Fatalf("Expand: %+v", fieldsOf(e))
	}
	if c.VerifyToken != "{env.VT}" {
		t.Fatal("Expand changed its receiver")
	}
}

// TestSignatureHeadersFromRegistry: every provider names its credentials
// headers, hmac and token providers their configured header.
func TestSignatureHeadersFromRegistry(t *testing.T) {
	if got := SignatureHeaders(Config{Scheme: "hmac", Header: "x-sig"}); len(got) != 1 || got[0] != "X-Sig" {
		t.Fatalf("hmac: %v", got)
	}
	if got := SignatureHeaders(Config{Scheme: "datadog", Header: "x-dd-token"}); got[0] != "X-Dd-Token" || got[1] != "Authorization" {
		t.Fatalf("datadog: %v", got)
	}
	if got := SignatureHeaders(Config{Scheme: "github"}); !reflect.DeepEqual(got, []string{"X-Hub-Signature-256", "X-Hub-Signature"}) {
		t.Fatalf("github: %v", got)
	}
	if SignatureHeaders(Config{Scheme: "nope"}) != nil {
		t.Fatal("unknown provider has headers")
	}
	for _, p := range all() {
		if len(p.SignatureHeaders) == 0 && p.Family != FamilyX509 && p.Name != "hmac" && p.Name != "mailgun" && p.Name != "mattermost" && p.Name != "msgraph" {
			t.Errorf("%s names no credentials header", p.Name)
		}
	}
}
