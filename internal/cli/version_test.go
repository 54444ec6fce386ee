package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/version"
)

// runVersionCmd runs `caddy hooks version args…` and returns its output.
func runVersionCmd(t *testing.T, args ...string) string {
	t.Helper()
	cmd := newVersionCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("version %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

func TestVersionCommand(t *testing.T) {
	// the running Caddy's admin API, answering as an older release would
	old := adminapi.VersionOf()
	old.Version, old.ClusterLevel = "v0.8.0", 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hooks/version" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(old)
	}))
	t.Cleanup(srv.Close)
	address := strings.TrimPrefix(srv.URL, "http://")

	tests := []struct {
		name  string
		args  []string
		first string   // the first line starts so
		has   []string // and the output holds these
	}{
		{"this binary", nil, "caddyhook " + version.Version, []string{"cluster level 2, admin API 1"}},
		{"with the formats", []string{"--formats"}, "caddyhook " + version.Version,
			[]string{"store", version.StoreSpool, version.StoreEventLog, version.StoreQueue, version.StoreIdempotency,
				version.StoreOutcome, "accept_unsealed_until"}},
		{"the running Caddy", []string{"--running", "--address", address}, "caddyhook v0.8.0", []string{"cluster level 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := runVersionCmd(t, tt.args...)
			if !strings.HasPrefix(out, tt.first) {
				t.Errorf("first line %q, want it to start with %q", strings.SplitN(out, "\n", 2)[0], tt.first)
			}
			for _, s := range tt.has {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
		})
	}

	var got adminapi.Version
	if err := json.Unmarshal([]byte(runVersionCmd(t, "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != version.Version || got.API != version.API || len(got.Formats) != len(version.Formats()) {
		t.Errorf("--json: %+v", got)
	}
}
