package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddyhook/caddyhook/caddyhook"
)

// TestCaddyfileAdapts adapts the generated Caddyfile with the real
// adapter and checks one server per row, on its handed-over socket, with
// the same settings each.
func TestCaddyfileAdapts(t *testing.T) {
	rows, _ := selectRows("a,b,c,d,e,f,i")
	for _, forwarded := range []bool{false, true} {
		env := &benchEnv{dir: "/tmp/hb", sink: "/tmp/hb/sink.sock", admin: "/tmp/hb/admin.sock",
			token: randomToken(), gwToken: randomToken(), clusterKey: randomToken(), ports: map[string]int{}, accessLog: forwarded, forwarded: forwarded}
		env.fds = map[string]int{}
		for i, r := range rows {
			env.ports[r.id] = 20000 + i
			env.fds[r.id] = 3 + i
		}
		cf := env.caddyfile(rows)
		out, warn, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": "Caddyfile"})
		if err != nil {
			t.Fatalf("adapt: %v\n%s", err, cf)
		}
		if len(warn) > 0 {
			t.Fatalf("warnings: %v", warn)
		}
		var cfg struct {
			Admin struct{ Listen string }
			Apps  struct {
				HTTP struct {
					Servers map[string]struct {
						Listen         []string
						TrustedProxies json.RawMessage `json:"trusted_proxies"`
						Strict         int             `json:"trusted_proxies_strict"`
						Logs           json.RawMessage
					}
				}
			}
		}
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Admin.Listen != "unix//tmp/hb/admin.sock" {
			t.Errorf("admin listens on %q", cfg.Admin.Listen)
		}
		servers := cfg.Apps.HTTP.Servers
		if len(servers) != len(rows) {
			t.Fatalf("%d servers for %d rows", len(servers), len(rows))
		}
		for _, srv := range servers {
			if len(srv.Listen) != 1 || !strings.HasPrefix(srv.Listen[0], "fd/") {
				t.Fatalf("server listens on %v, want one handed-over socket", srv.Listen)
			}
			isE := srv.Listen[0] == "fd/"+strconv.Itoa(env.fds["e"])
			if got := srv.TrustedProxies != nil; got != (forwarded && isE) {
				t.Errorf("forwarded=%v: %s has trusted_proxies %v", forwarded, srv.Listen[0], got)
			}
			if srv.TrustedProxies != nil && srv.Strict <= 0 {
				t.Errorf("%s trusts proxies without trusted_proxies_strict", srv.Listen[0])
			}
			if got := srv.Logs != nil; got != env.accessLog {
				t.Errorf("%s: access log %v, want %v", srv.Listen[0], got, env.accessLog)
			}
		}
		if !strings.Contains(cf, "spool /tmp/hb/spool") || !strings.Contains(cf, "gateway unix//tmp/hb/sink.sock") {
			t.Fatalf("placeholders not expanded:\n%s", cf)
		}
	}
}

func TestCaddyError(t *testing.T) {
	out := []byte(`{"level":"info","msg":"using config"}
{"level":"error","ts":1,"msg":"parsing caddyfile tokens for 'hooks': unrecognized hooks subdirective 'mapping'"}
`)
	if got := caddyError(out); !strings.Contains(got, "unrecognized hooks subdirective") {
		t.Fatalf("got %q", got)
	}
	if got := caddyError([]byte("plain\nError: adapting config: boom\n")); got != "Error: adapting config: boom" {
		t.Fatalf("got %q", got)
	}
}
