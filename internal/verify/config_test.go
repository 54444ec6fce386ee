package verify

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNewValidation(t *testing.T) {
	sec := []string{genericSecret}
	shortKey := "whsec_" + base64.StdEncoding.EncodeToString([]byte("fifteen-bytes!!"))
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" = valid
	}{
		{"github", Config{Scheme: "github", Secrets: sec}, ""},
		{"stripe", Config{Scheme: "stripe", Secrets: sec, Tolerance: time.Minute}, ""},
		{"slack", Config{Scheme: "slack", Secrets: sec}, ""},
		{"standard", Config{Scheme: "standard", Secrets: []string{standardSecret}}, ""},
		{"standard without whsec_ prefix", Config{Scheme: "standard", Secrets: []string{strings.TrimPrefix(standardSecret, "whsec_")}}, ""},
		{"hmac minimal", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig"}, ""},
		{"secret trimmed", Config{Scheme: "github", Secrets: []string{" " + genericSecret + "\n"}}, ""},
		{"eight secrets", Config{Scheme: "github", Secrets: []string{sec[0], sec[0], sec[0], sec[0], sec[0], sec[0], sec[0], sec[0]}}, ""},
		{"no scheme", Config{Secrets: sec}, "scheme: required"},
		{"unknown scheme", Config{Scheme: "gitlabb", Secrets: sec}, `scheme: unknown "gitlabb"; did you mean "gitlab"?`},
		{"unknown scheme far from any", Config{Scheme: "zzzzzzzzzz", Secrets: sec}, `scheme: unknown "zzzzzzzzzz" (`},
		{"scheme case", Config{Scheme: "GitHub", Secrets: sec}, "scheme: unknown"},
		{"no secrets", Config{Scheme: "github"}, "secrets: at least one"},
		{"nine secrets", Config{Scheme: "github", Secrets: make([]string, 9)}, "secrets: at most 8"},
		{"empty secret", Config{Scheme: "github", Secrets: []string{sec[0], "  "}}, "secrets[1]: empty"},
		{"unexpanded placeholder", Config{Scheme: "github", Secrets: []string{"{env.GITHUB_WEBHOOK_SECRET}"}}, "secrets[0]: placeholder was not expanded"},
		{"short secret", Config{Scheme: "github", Secrets: []string{"fifteen-bytes!!"}}, "secrets[0]: shorter than 16 bytes"},
		{"16-byte secret", Config{Scheme: "github", Secrets: []string{"sixteen-bytes!!!"}}, ""},
		{"short decoded whsec", Config{Scheme: "standard", Secrets: []string{shortKey}}, "secrets[0]: shorter than 16 bytes"},
		{"bad whsec base64", Config{Scheme: "standard", Secrets: []string{"whsec_not*base64!!!!!!!!!!!!!"}}, "secrets[0]: not valid base64"},
		{"stripe whsec not decoded", Config{Scheme: "stripe", Secrets: []string{"whsec_not*base64!!!!"}}, ""},
		{"negative tolerance", Config{Scheme: "slack", Secrets: sec, Tolerance: -time.Second}, "tolerance: must not be negative"},
		{"github tolerance", Config{Scheme: "github", Secrets: sec, Tolerance: time.Minute}, "tolerance: github signatures carry no timestamp"},
		{"header on github", Config{Scheme: "github", Secrets: sec, Header: "X-Sig"}, "header: not read by verify github (it reads: secret)"},
		{"layout on stripe", Config{Scheme: "stripe", Secrets: sec, Layout: "{body}"}, "layout: not read by verify stripe"},
		{"algorithm on standard", Config{Scheme: "standard", Secrets: []string{standardSecret}, Algorithm: "sha1"}, "algorithm: not read by verify standard"},
		{"hmac no header", Config{Scheme: "hmac", Secrets: sec}, "header: required"},
		{"hmac bad header", Config{Scheme: "hmac", Secrets: sec, Header: "X Sig"}, "header: \"X Sig\" is not a valid header name"},
		{"hmac bad timestamp header", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", TimestampHeader: "X:Ts", Layout: "{timestamp}{body}"}, "timestamp_header: \"X:Ts\" is not"},
		{"hmac bad id header", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", IDHeader: "X\nId"}, "id_header:"},
		{"hmac same headers", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", TimestampHeader: "x-sig", Layout: "{timestamp}{body}"}, "must differ"},
		{"hmac unknown algorithm", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", Algorithm: "md5"}, `algorithm: unknown "md5"`},
		{"hmac unknown encoding", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", Encoding: "base32"}, `encoding: unknown "base32"`},
		{"hmac prefix with space", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", Prefix: "sha256 "}, "prefix:"},
		{"hmac layout without body", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", Layout: "{timestamp}", TimestampHeader: "X-Ts"}, "layout: must contain {body}"},
		{"hmac layout timestamp without header", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", Layout: "{timestamp}.{body}"}, "layout: {timestamp} needs timestamp_header"},
		{"hmac unsigned timestamp header", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", TimestampHeader: "X-Ts"}, "timestamp_header: layout must sign {timestamp}"},
		{"hmac layout id without header", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", Layout: "{id}.{body}"}, "layout: {id} needs id_header"},
		{"hmac tolerance without timestamp", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", Tolerance: time.Minute}, "tolerance: needs timestamp_header"},
		{"hmac negative tolerance", Config{Scheme: "hmac", Secrets: sec, Header: "X-Sig", TimestampHeader: "X-Ts", Layout: "{timestamp}{body}", Tolerance: -1}, "tolerance: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := New(tt.cfg)
			if tt.wantErr == "" {
				if err != nil || v == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want it to contain %q", err, tt.wantErr)
			}
			for _, s := range tt.cfg.Secrets {
				if s = strings.TrimSpace(s); len(s) > 3 && strings.Contains(err.Error(), s) {
					t.Fatalf("New error %q reveals a secret", err)
				}
			}
		})
	}
}

func TestConfigJSON(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Config
		wantErr string
	}{
		{name: "duration string", in: `{"scheme":"stripe","secrets":["{env.S}"],"tolerance":"5m"}`,
			want: Config{Scheme: "stripe", Secrets: []string{"{env.S}"}, Tolerance: 5 * time.Minute}},
		{name: "nanoseconds", in: `{"scheme":"slack","tolerance":90000000000}`, want: Config{Scheme: "slack", Tolerance: 90 * time.Second}},
		{name: "null tolerance", in: `{"scheme":"slack","tolerance":null}`, want: Config{Scheme: "slack"}},
		{name: "all hmac fields", in: `{"scheme":"hmac","secrets":["a","b"],"header":"X-Sig","prefix":"sha1=","algorithm":"sha1","encoding":"base64","timestamp_header":"X-Ts","layout":"{timestamp}.{body}","id_header":"X-Id","tolerance":"1m30s"}`,
			want: Config{Scheme: "hmac", Secrets: []string{"a", "b"}, Header: "X-Sig", Prefix: "sha1=", Algorithm: "sha1", Encoding: "base64", TimestampHeader: "X-Ts", Layout: "{timestamp}.{body}", IDHeader: "X-Id", Tolerance: 90 * time.Second}},
		{name: "unknown field", in: `{"scheme":"github","secret":"x"}`, wantErr: `unknown field "secret"`},
		{name: "bad duration", in: `{"scheme":"github","tolerance":"5 minutes"}`, wantErr: "tolerance"},
		{name: "float duration", in: `{"scheme":"github","tolerance":1.5}`, wantErr: "tolerance"},
		{name: "wrong type", in: `{"scheme":7}`, wantErr: "verify config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Config
			err := json.Unmarshal([]byte(tt.in), &got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Unmarshal error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Unmarshal = %#v, want %#v", fieldsOf(got), fieldsOf(tt.want))
			}
		})
	}
}

// fieldsOf exposes a Config's raw fields for failure messages of tests
// whose secrets are placeholders or dummies.
func fieldsOf(c Config) configFields { return configFields(c) }

// TestConfigJSONRoundTrip: the JSON of a Config is what the Caddyfile
// adapter writes, so secrets survive it as written, placeholders and
// literals alike (the handler warns about literals at provision).
func TestConfigJSONRoundTrip(t *testing.T) {
	in := Config{Scheme: "hmac", Secrets: []string{"{env.NEW_SECRET}", " {file./run/secrets/old} ", "literal-secret-value-0123456789"}, Tolerance: 2 * time.Minute,
		Header: "X-Sig", TimestampHeader: "X-Ts", Layout: "{timestamp}.{body}"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Config
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip = %#v, want %#v (json %s)", fieldsOf(out), fieldsOf(in), b)
	}
}

// TestRedaction checks every way a Config, Verifier or Error can be shown
// (a Config's JSON is the config itself, see TestConfigJSONRoundTrip).
func TestRedaction(t *testing.T) {
	secrets := []string{"literal-secret-value-0123456789", "whsec_" + base64.StdEncoding.EncodeToString([]byte("decoded-key-bytes-0123456789")), "{env.KEPT_NAME}"}
	leaks := []string{secrets[0], secrets[1], strings.TrimPrefix(secrets[1], "whsec_"), "decoded-key-bytes"}
	cfg := Config{Scheme: SchemeStandard, Secrets: []string{secrets[1], standardSecret}}
	v := mustNew(t, cfg)
	_, verr := v.Verify(hdr("webhook-id", "m", "webhook-timestamp", ts(0), "webhook-signature", standardSig(t, secrets[1], "m", ts(0), "{}")), []byte("{}x"), testNow)
	if verr == nil {
		t.Fatal("tampered body verified")
	}
	shown := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		shown["Config "+verb] = fmt.Sprintf(verb, Config{Scheme: "github", Secrets: secrets})
		shown["*Config "+verb] = fmt.Sprintf(verb, &Config{Scheme: "github", Secrets: secrets})
		shown["Verifier "+verb] = fmt.Sprintf(verb, *v)
		shown["*Verifier "+verb] = fmt.Sprintf(verb, v)
		shown["nested "+verb] = fmt.Sprintf(verb, struct {
			C Config
			V *Verifier
		}{Config{Scheme: "github", Secrets: secrets}, v})
		shown["Error "+verb] = fmt.Sprintf(verb, verr)
	}
	for _, x := range []any{v, *v} {
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		shown[fmt.Sprintf("json %T", x)] = string(b)
	}
	for where, s := range shown {
		for _, leak := range leaks {
			if strings.Contains(s, leak) {
				t.Errorf("%s reveals a secret: %s", where, s)
			}
		}
	}
	for _, where := range []string{"Config %v", "*Config %+v"} {
		if !strings.Contains(shown[where], "{env.KEPT_NAME}") || !strings.Contains(shown[where], redacted) {
			t.Errorf("%s = %s, want the placeholder kept and literals %s", where, shown[where], redacted)
		}
	}
	if !strings.Contains(shown["*Verifier %v"], `Scheme:"standard"`) || !strings.Contains(shown["*Verifier %v"], "Secrets:2") {
		t.Errorf("Verifier shown as %s", shown["*Verifier %v"])
	}
}

func TestIsSecretPlaceholder(t *testing.T) {
	tests := map[string]bool{
		"{env.X}": true, " {env.GITHUB_WEBHOOK_SECRET} ": true, "{file./run/s}": true,
		"{env.}": false, "{env.X}{env.Y}": false, "{env.X}tail": false, "{http.request.header.X}": false,
		"{secret}": false, "plain": false, "{env.A B}": false, "": false,
	}
	for in, want := range tests {
		if got := IsSecretPlaceholder(in); got != want {
			t.Errorf("IsSecretPlaceholder(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestErrorIs(t *testing.T) {
	err := fail(ReasonBadSignature, "X-Hub-Signature-256")
	if !errors.Is(err, &Error{Reason: ReasonBadSignature}) {
		t.Error("errors.Is by reason failed")
	}
	if errors.Is(err, &Error{Reason: ReasonStaleTimestamp}) {
		t.Error("errors.Is matched a different reason")
	}
	if got, want := err.Error(), "signature verification failed: bad signature (X-Hub-Signature-256)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := fail(ReasonBadChallenge, "").Error(), "signature verification failed: "+ReasonBadChallenge; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestConfigString(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Scheme: "github", Secrets: []string{"literal-secret-0123456789"}},
			`verify.Config{Scheme:"github" Secrets:["[REDACTED]"]}`},
		{Config{Scheme: "hmac", Secrets: []string{"{env.S}", "x"}, Tolerance: time.Minute, Header: "X-Sig", Prefix: "v1=",
			Algorithm: "sha512", Encoding: "base64", TimestampHeader: "X-Ts", Layout: "{timestamp}.{body}", IDHeader: "X-Id"},
			`verify.Config{Scheme:"hmac" Secrets:["{env.S}" "[REDACTED]"] Tolerance:1m0s Header:"X-Sig" Prefix:"v1=" Algorithm:"sha512" Encoding:"base64" TimestampHeader:"X-Ts" Layout:"{timestamp}.{body}" IDHeader:"X-Id"}`},
		{Config{}, `verify.Config{Scheme:"" Secrets:[]}`},
	}
	for _, tt := range tests {
		if got := tt.cfg.String(); got != tt.want {
			t.Errorf("String() =\n%s\nwant\n%s", got, tt.want)
		}
		if got := tt.cfg.GoString(); got != tt.want {
			t.Errorf("GoString() = %s", got)
		}
	}
	if got := fmt.Sprint(Verifier{}); got != `verify.Verifier{Scheme:"" Secrets:0}` {
		t.Errorf("zero Verifier shown as %s", got)
	}
	v := mustNew(t, Config{Scheme: SchemeSlack, Secrets: []string{slackSecret}})
	if v.Scheme() != SchemeSlack {
		t.Errorf("Scheme() = %q", v.Scheme())
	}
}
