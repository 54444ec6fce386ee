package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestScaleNodeCaddyfileAdapts adapts each role's node Caddyfile with the
// real adapter: one server on the handed-over socket, trusting the load
// generator's X-Forwarded-For, and the hooks handler with (or, alone,
// without) the cluster and the role's spool.
func TestScaleNodeCaddyfileAdapts(t *testing.T) {
	for _, tc := range []struct {
		role       scaleNodeRole
		rate       string
		cluster    bool
		spool      string // what the handler's spool holds ("" = none)
		gatewaySet bool
	}{
		{roleEdge, "", true, `"deliver":false`, false},
		{roleDeliver, "100/1s", true, `"rate":{"count":100,"interval":1000000000}`, true},
		{roleAlone, "", false, "", true},
	} {
		c := scaleNodeConfig{admin: "/tmp/hb/n0/admin.sock", port: 20001, token: randomToken(), gwToken: randomToken(),
			sink: "/tmp/hb/sink.sock", natsURL: "nats://127.0.0.1:4222", namespace: "scale3", key: randomToken(), role: tc.role, rate: tc.rate}
		out, warn, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(c.caddyfile()), map[string]any{"filename": "Caddyfile"})
		if err != nil {
			t.Fatalf("role %d: adapt: %v\n%s", tc.role, err, c.caddyfile())
		}
		if len(warn) > 0 {
			t.Fatalf("role %d: warnings: %v", tc.role, warn)
		}
		var cfg struct {
			Apps struct {
				HTTP struct {
					Servers map[string]struct {
						Listen         []string
						TrustedProxies json.RawMessage `json:"trusted_proxies"`
						Routes         []struct{ Handle []json.RawMessage }
					}
				}
			}
		}
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatal(err)
		}
		srv, ok := cfg.Apps.HTTP.Servers["srv0"]
		if !ok || len(srv.Listen) != 1 || srv.Listen[0] != "fd/3" || srv.TrustedProxies == nil {
			t.Fatalf("role %d: server %+v, want one on fd/3 trusting proxies", tc.role, srv)
		}
		h := string(srv.Routes[0].Handle[0])
		if got := strings.Contains(h, `"cluster":{"engine":"nats"`) && strings.Contains(h, `"name":"scale3"`); got != tc.cluster {
			t.Errorf("role %d: cluster %v, want %v: %s", tc.role, got, tc.cluster, h)
		}
		if tc.spool != "" && !strings.Contains(h, tc.spool) {
			t.Errorf("role %d: spool without %s: %s", tc.role, tc.spool, h)
		}
		if got := strings.Contains(h, `"gateway":"unix//tmp/hb/sink.sock"`); got != tc.gatewaySet {
			t.Errorf("role %d: gateway %v, want %v", tc.role, got, tc.gatewaySet)
		}
	}
}

func TestParseNodeCounts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{"1,2,4,8,16", []int{1, 2, 4, 8, 16}, ""},
		{" 3 , 9", []int{3, 9}, ""},
		{"2,2", nil, "increasing"},
		{"0,4", nil, "from 1 to 64"},
		{"4,x", nil, "from 1 to 64"},
		{"65", nil, "from 1 to 64"},
	} {
		got, err := parseNodeCounts(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Fatalf("%q: %v %v", tc.in, got, err)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}

// TestScaleReportVerdicts checks the growth ratios and verdicts the text
// report derives from the rows.
func TestScaleReportVerdicts(t *testing.T) {
	rep := &scaleReport{Connections: 32, FloodRate: 4000, Duration: 4, Limit: 20, Rows: []scaleRow{
		{Nodes: 2, MsgsPerNodePerF: 0.1, CPUPerNodePerFus: 40, ShareCPUPerNodeus: 10, Bounds: []int{21, 24}, Bound: 24, BoundAllowed: 24},
		{Nodes: 16, MsgsPerNodePerF: 0.2, CPUPerNodePerFus: 20, ShareCPUPerNodeus: 12, Bounds: []int{60, -1}, Bound: -1, BoundAllowed: 52},
	}, Delivery: &scaleDelivery{Nodes: 3, Wake: 10, Agent: 10, WakeRate: 60, AgentRate: 100},
		Rate: &scaleRate{Nodes: 3, Rate: "100/1s", Want: 100, Measured: 89, Window: 6}}
	var b strings.Builder
	if err := rep.writeText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"messages received per node per cluster-wide failure: N=16 is 2.00× N=2 (target ≤ 1.5×) FAIL",
		"CPU per node per cluster-wide failure: N=16 is 0.50× N=2 (target ≤ 1.5×) PASS",
		"sharing CPU per node per cluster-wide failure: N=16 is 1.20× N=2 (target ≤ 1.5×) PASS",
		"24 PASS", "52 FAIL",
		"wake = 0.60× agent (target ≥ 0.5) PASS",
		"= 0.89× (target within 10%) FAIL",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
