package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// runProvidersCmd runs `caddy hooks providers args…`.
func runProvidersCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newProvidersCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestProvidersCommand: the table lists every provider of the registry
// (at least 50, issue 29) with its scheme, handshake, delivery id, event
// and body; --json the registry's Info; a name describes one provider;
// a misspelt name suggests the closest.
func TestProvidersCommand(t *testing.T) {
	out, err := runProvidersCmd(t)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "DELIVERY ID") {
		t.Fatalf("header %q", lines[0])
	}
	names := verify.Names()
	if len(names) < 50 {
		t.Fatalf("%d providers, want at least 50", len(names))
	}
	rows := map[string]string{}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = l
		}
	}
	for _, n := range names {
		if rows[n] == "" {
			t.Errorf("no row for %s", n)
		}
	}
	for name, want := range map[string][]string{
		"meta":    {"hmac", "GET", "JSON"},
		"discord": {"ed25519", "POST", "body id"},
		"twilio":  {"hmac", "JSON or form", "MessageSid"},
		"sns":     {"x509", "POST"},
		"pubsub":  {"jwt", "message.messageId"},
		"github":  {"hmac", "X-Github-Delivery", "X-Github-Event"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[name], w) {
				t.Errorf("row %q lacks %q", rows[name], w)
			}
		}
	}
	if !strings.Contains(out, "providers; caddy hooks providers <name> describes one") {
		t.Errorf("no count line:\n%s", out)
	}

	out, err = runProvidersCmd(t, "--json")
	var infos []verify.Info
	if err != nil || json.Unmarshal([]byte(out), &infos) != nil || len(infos) != len(names) {
		t.Fatalf("--json: %v, %d entries", err, len(infos))
	}

	out, err = runProvidersCmd(t, "zoom")
	if err != nil || !strings.Contains(out, "endpoint.url_validation") || !strings.Contains(out, "replay window") || !strings.Contains(out, "Zoom {{event}}") {
		t.Fatalf("zoom: %v\n%s", err, out)
	}
	if _, err := runProvidersCmd(t, "shopfiy"); err == nil || !strings.Contains(err.Error(), `did you mean "shopify"`) {
		t.Fatalf("misspelt: %v", err)
	}
}
