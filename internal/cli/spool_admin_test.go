package cli

import (
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/adminapi"
)

// TestPickSpooled: which running handler's spool a spool command works on.
func TestPickSpooled(t *testing.T) {
	a := adminapi.HandlerStatus{Path: "/a", Spool: &adminapi.Spool{Dir: "/var/spool/a"}}
	b := adminapi.HandlerStatus{Path: "/b", Spool: &adminapi.Spool{Dir: "/var/spool/b"}}
	none := adminapi.HandlerStatus{Path: "/n"}
	tests := []struct {
		name      string
		handlers  []adminapi.HandlerStatus
		dir, path string
		want      string // base path picked; "" = none (use the file)
		wantErr   string
	}{
		{"only spool", []adminapi.HandlerStatus{none, a}, "", "", "/a", ""},
		{"by dir", []adminapi.HandlerStatus{a, b}, "/var/spool/b", "", "/b", ""},
		{"dir not running: the file", []adminapi.HandlerStatus{a, b}, "/var/spool/c", "", "", ""},
		{"by path", []adminapi.HandlerStatus{a, b}, "", "/b/", "/b", ""},
		{"path without spool", []adminapi.HandlerStatus{a, none}, "", "/n", "", "no hooks handler with a spool at --base /n"},
		{"several", []adminapi.HandlerStatus{a, b}, "", "", "", "several spools; choose one with --base or --dir"},
		{"no spool at all", []adminapi.HandlerStatus{none}, "", "", "", "has no hooks handler with a spool"},
	}
	for _, tt := range tests {
		c := &spoolCLI{admin: "localhost:2019"}
		h, err := c.pickSpooled(tt.handlers, tt.dir, tt.path)
		got := ""
		if h != nil {
			got = h.Path
		}
		if got != tt.want || (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: picked %q, error %v; want %q, error %q", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}
