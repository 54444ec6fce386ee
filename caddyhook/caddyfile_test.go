package caddyhook

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // the caddyfile adapter
)

// adaptCaseSep separates a case's Caddyfile from its expectation.
const adaptCaseSep = "\n----------\n"

// TestCaddyfileAdapt runs every testdata/caddyfile/*.txt case: the
// Caddyfile is adapted and compared, as JSON values, with the expected
// config; an expectation of the form "error: <text>" wants an adapt error
// containing <text>.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "caddyfile", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no adapt cases: %v", err)
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	if adapter == nil {
		t.Fatal("caddyfile adapter not registered")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, want, ok := strings.Cut(string(data), adaptCaseSep)
			if !ok {
				t.Fatalf("%s: no %q separator line", file, strings.TrimSpace(adaptCaseSep))
			}
			got, warnings, err := adapter.Adapt([]byte(input+"\n"), nil)
			if wantErr, isErr := strings.CutPrefix(strings.TrimSpace(want), "error: "); isErr {
				if err == nil {
					t.Fatalf("adapted without error, want %q:\n%s", wantErr, got)
				}
				if !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("error %q does not contain %q", err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			for _, w := range warnings {
				t.Errorf("warning: %s", w.String())
			}
			if diff := jsonDiff(got, []byte(want)); diff != "" {
				t.Fatal(diff)
			}
		})
	}
}

// jsonDiff compares two JSON documents as values and describes the
// difference, or returns "".
func jsonDiff(got, want []byte) string {
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return "adapted config is not JSON: " + err.Error()
	}
	if err := json.Unmarshal(want, &w); err != nil {
		return "expected config is not JSON: " + err.Error()
	}
	if reflect.DeepEqual(g, w) {
		return ""
	}
	var gi, wi bytes.Buffer
	_ = json.Indent(&gi, got, "", "  ")
	wn, _ := json.Marshal(w)
	_ = json.Indent(&wi, wn, "", "  ")
	return "adapted config differs\n--- got\n" + gi.String() + "\n--- want\n" + wi.String()
}
