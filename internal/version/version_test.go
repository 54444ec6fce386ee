package version

import (
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddyhook/caddyhook/internal/promtest"
)

// semverRe is a release version as Go modules and the CHANGELOG write it.
var semverRe = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

func TestVersionIsARelease(t *testing.T) {
	if !semverRe.MatchString(Version) {
		t.Fatalf("Version %q is not vMAJOR.MINOR.PATCH", Version)
	}
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	// the changelog names the release: under its own heading once it is
	// cut, or in the unreleased section's entries until then
	if !strings.Contains(string(b), "## ["+strings.TrimPrefix(Version, "v")+"]") && !strings.Contains(string(b), Version) {
		t.Errorf("CHANGELOG.md does not name %s", Version)
	}
}

func TestFormatsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Formats() {
		switch {
		case f.Store == "" || f.What == "":
			t.Errorf("%+v: store and what are required", f)
		case seen[f.Store]:
			t.Errorf("store %q listed twice", f.Store)
		case f.Reads < 0 || f.Reads > f.Writes:
			t.Errorf("%s: reads from %d, writes %d: a release reads what it writes and may read older versions", f.Store, f.Reads, f.Writes)
		}
		seen[f.Store] = true
	}
	for _, s := range []string{StoreSpool, StoreEventLog, StoreQueue, StoreDeadLetter, StoreIdempotency, StoreLock,
		StoreFailures, StoreMembers, StoreLease, StoreOutcome, StoreAdminAPI} {
		if !seen[s] {
			t.Errorf("store %q missing from Formats", s)
		}
	}
}

func TestFromBuildInfo(t *testing.T) {
	base := Build{Version: Version}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want Build
	}{
		{"main module from a checkout", debug.BuildInfo{Main: debug.Module{Path: Module, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}},
			Build{Version: Version, Module: "(devel)", Revision: "0123456789abcdef0123", Modified: true}},
		{"a dependency (xcaddy)", debug.BuildInfo{Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: "github.com/caddyserver/caddy/v2", Version: "v2.11.9"}, {Path: Module, Version: "v0.9.0"}}},
			Build{Version: Version, Module: "v0.9.0"}},
		{"a replaced dependency", debug.BuildInfo{Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: Module, Version: "v0.9.0", Replace: &debug.Module{Path: "../caddyhook"}}}},
			Build{Version: Version, Module: "v0.9.0 => ../caddyhook"}},
		{"not in the binary", debug.BuildInfo{Main: debug.Module{Path: "other"}}, Build{Version: Version}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuildInfo(base, &tc.bi); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBuildString(t *testing.T) {
	for _, tc := range []struct {
		b    Build
		want string
	}{
		{Build{Version: "v0.9.0", GoVersion: "go1.26"}, "caddyhook v0.9.0 go1.26"},
		{Build{Version: "v0.9.0", Module: "v0.9.0", GoVersion: "go1.26"}, "caddyhook v0.9.0 go1.26"},
		{Build{Version: "v0.9.0", Module: "(devel)", Revision: "0123456789abcdef", Modified: true, GoVersion: "go1.26"},
			"caddyhook v0.9.0 (module (devel)) revision 0123456789ab+modified go1.26"},
	} {
		if got := tc.b.String(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.b, got, tc.want)
		}
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	u := NewUnreadable()
	reg.MustRegister(NewBuildInfo(), u.Collector())
	u.Add(StoreSpool, 3, 2)
	u.Add(StoreSpool, 3, 0) // nothing
	var nilU *Unreadable
	nilU.Add(StoreSpool, 3, 1) // no panic
	if got, _ := promtest.Value(reg, "caddy_hooks_records_unreadable_total", "store", StoreSpool, "version", "3"); got != 2 {
		t.Errorf("unreadable spool v3 = %v, want 2", got)
	}
	if got, ok := promtest.Value(reg, "caddy_hooks_build_info", "version", Version, "cluster_level", strconv.Itoa(ClusterLevel), "api", "1"); !ok || got != 1 {
		t.Errorf("caddy_hooks_build_info{version=%q} = %v (found %v), want 1", Version, got, ok)
	}
}

// TestDocsFormatsTable: the table of formats of docs/upgrades.md is
// this one.
func TestDocsFormatsTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/upgrades.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, f := range Formats() {
		if row := readmeRow(f); !strings.Contains(readme, "\n"+row+"\n") {
			t.Errorf("docs/upgrades.md lacks the row\n%s", row)
		}
	}
	for _, want := range []string{"This is **" + Version + "**", "caddy_hooks_build_info", "caddy_hooks_records_unreadable_total{store,version}",
		"caddy_hooks_cluster_level", "Hooks-Api-Version: " + fmt.Sprint(API)} {
		if !strings.Contains(readme, want) {
			t.Errorf("docs/upgrades.md lacks %q", want)
		}
	}
}

// readmeRow is f as a row of the table of formats (docs/upgrades.md).
func readmeRow(f Format) string {
	note := f.Note
	if note == "" {
		note = "—"
	}
	return fmt.Sprintf("| `%s` | %s | %d | %d–%d | %s |", f.Store, f.What, f.Writes, f.Reads, f.Writes, note)
}
