package caddyhook

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/version"
)

// TestAdminVersion: GET /hooks/version answers the running build's
// version, cluster level, admin API version and formats; every admin
// answer (an error too) carries the API version header; /metrics has the
// build info gauge.
func TestAdminVersion(t *testing.T) {
	_, adm := startOpsIngress(t, ingressOpts{})
	var v adminapi.Version
	adm.call(http.MethodGet, "/hooks/version", "", http.StatusOK, &v)
	if v.Version != version.Version || v.ClusterLevel != version.ClusterLevel || v.API != version.API ||
		len(v.Formats) != len(version.Formats()) || v.GoVersion == "" {
		t.Errorf("GET /hooks/version: %+v", v)
	}
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/hooks/", http.StatusOK},
		{http.MethodGet, "/hooks/version", http.StatusOK},
		{http.MethodPost, "/hooks/version", http.StatusMethodNotAllowed},
		{http.MethodGet, "/hooks/nothing", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tc.method, "http://127.0.0.1"+tc.path, nil)
		resp, err := adm.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get(version.APIHeader) != strconv.Itoa(version.API) {
			t.Errorf("%s %s: %d, %s %q (%s); want %d, %d", tc.method, tc.path, resp.StatusCode, version.APIHeader,
				resp.Header.Get(version.APIHeader), body, tc.status, version.API)
		}
		if tc.status != http.StatusOK && !json.Valid(body) {
			t.Errorf("%s %s: error answer is not JSON: %s", tc.method, tc.path, body)
		}
	}
	series := `caddy_hooks_build_info{api="` + strconv.Itoa(version.API) + `",cluster_level="` + strconv.Itoa(version.ClusterLevel) +
		`",go_version="` + v.GoVersion + `",revision="` + v.Revision + `",version="` + version.Version + `"}`
	if got := adm.metric(series); got != 1 {
		_, text := adm.do(http.MethodGet, "/metrics", "")
		var lines []string
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, "build_info") {
				lines = append(lines, l)
			}
		}
		t.Errorf("%s = %v, want 1; /metrics has %q", series, got, lines)
	}
}
