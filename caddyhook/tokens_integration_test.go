package caddyhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIntegrationTokenRotation (issue 16 item 4): two tokens are both
// accepted; after a reload without the old one, it is refused. Tokens
// come from files, which a reload reads again. token_headers (issue 13):
// the gateway's own header authenticates too.
func TestIntegrationTokenRotation(t *testing.T) {
	in := startIngress(t, ingressOpts{})
	oldTok, newTok := itHookToken, "it-rotated-token-5b4a39281706f5e4d3c2b1a0"
	oldFile, newFile := filepath.Join(in.dir, "old.token"), filepath.Join(in.dir, "new.token")
	for f, v := range map[string]string{oldFile: oldTok + "\n", newFile: newTok + "\n"} {
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cf := func(tokens string) string {
		return strings.Replace(in.siteCaddyfile("", "http://"+in.hostPort(), tokens+"\n\t\ttoken_headers x-openclaw-token"),
			"token "+itHookToken+"\n", "", 1)
	}
	in.reloadTo(cf("token {file."+oldFile+"}\n\t\ttoken {file."+newFile+"}"), nil)
	for _, c := range []struct{ name, hdr string }{
		{"old", "Authorization: Bearer " + oldTok},
		{"new", "Authorization: Bearer " + newTok},
		{"new as x-openclaw-token", "x-openclaw-token: " + newTok},
	} {
		if r := in.do("POST", "/hooks/wake", `{"text":"rotation"}`, c.hdr); r.status != 200 {
			t.Fatalf("%s token during the rotation: %d %s", c.name, r.status, r.body)
		}
	}
	in.reloadTo(cf("token {file."+newFile+"}"), nil)
	if r := in.do("POST", "/hooks/wake", `{"text":"x"}`, "Authorization: Bearer "+oldTok); r.status != 401 {
		t.Fatalf("removed token after the reload: %d, want 401", r.status)
	}
	if r := in.do("POST", "/hooks/wake", `{"text":"x"}`, "Authorization: Bearer "+newTok); r.status != 200 {
		t.Fatalf("new token after the reload: %d %s", r.status, r.body)
	}
	if logs := in.logs(); strings.Contains(logs, newTok) || strings.Contains(logs, oldTok) {
		t.Fatal("a token reached the log")
	}
}
