package caddyhook

import (
	"encoding/json"
	"fmt"
	"net/http"
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

// TestTokenShapesNeverRecorded (issue 34 B6): the hook tokens, in every
// shape the attacks found, reach neither the event log (its events, their
// bodies, headers and idempotency keys, its rejection rows, events.db, so
// neither the console) nor Caddy's log (the access log, the rejection
// lines): a body holding the token across the max_body cut, the other
// token of a rotation in a body, tokens in allow-listed header values and
// an idempotency key, and hook names /hooks/Bearer%20<token>,
// /hooks/token=<token>, a token split by %2F, a piece of a token. Before:
// 40 of the token's characters stayed in the cut body (noted "the hook
// token was replaced"), the rotation's other token, the header values and
// the hook names were recorded in clear, in the access log too.
func TestTokenShapesNeverRecorded(t *testing.T) {
	dir := t.TempDir()
	const second = "it-second-token-Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7"
	tokens := []string{itHookToken, second}
	in, adm := startOpsIngress(t, ingressOpts{hooks: fmt.Sprintf(`token %s
		events {
			bodies on
			max_body 1KiB
			dir %s
			headers X-Trace-Note
		}`, second, dir)})
	head := `{"message":"`
	cutBody := head + strings.Repeat("x", 1024-len(head)-40) + itHookToken + `"}` // 40 characters before the cut
	for _, c := range []struct {
		name, path, body string
		hdr              []string
		noToken          bool
	}{
		{name: "the token across the max_body cut", path: "/hooks/agent", body: cutBody},
		{name: "the rotation's other token in the body", path: "/hooks/agent", body: `{"message":"the other is ` + second + `"}`},
		{name: "tokens in allow-listed header values", path: "/hooks/wake", body: `{"text":"t"}`,
			hdr: []string{"User-Agent: deploy-bot " + itHookToken, "X-Trace-Note: " + second, "Idempotency-Key: k-" + itHookToken[:30]}},
		{name: "Bearer%20<token> as the hook name", path: "/hooks/Bearer%20" + itHookToken, body: `{}`, noToken: true},
		{name: "token=<token> as the hook name", path: "/hooks/token=" + second, body: `{}`, noToken: true},
		{name: "a token split by %2F", path: "/hooks/" + itHookToken[:20] + "%2F" + itHookToken[20:], body: `{}`, noToken: true},
		{name: "a piece of a token", path: "/hooks/" + second[:24], body: `{}`, noToken: true},
	} {
		var r result
		if c.noToken {
			r = in.do(http.MethodPost, c.path, c.body, c.hdr...)
		} else {
			r = in.post(c.path, c.body, c.hdr...)
		}
		t.Logf("%s: %d", c.name, r.status)
	}
	p := adm.listEvents("")
	if len(p.events) != 3 {
		t.Fatalf("%d events, want 3: %v", len(p.events), p.order)
	}
	for _, e := range p.events {
		d := adm.event(e.ID)
		b, _ := json.Marshal(d)
		if piece := pieceOf(string(b), tokens); piece != "" {
			t.Errorf("event %s shows %q of a token: %s", e.Hook, piece, b)
		}
	}
	for _, row := range p.rows {
		b, _ := json.Marshal(row)
		if piece := pieceOf(string(b), tokens); piece != "" {
			t.Errorf("a rejection row shows %q of a token: %s", piece, b)
		}
	}
	for _, ans := range adm.answers {
		if piece := pieceOf(ans, tokens); piece != "" {
			t.Errorf("an admin answer (the console's API) shows %q of a token: %.300s", piece, ans)
		}
	}
	caddyStopAndWait(t)
	for _, f := range []string{filepath.Join(dir, "events.db"), in.logPath} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if piece := pieceOf(string(b), tokens); piece != "" {
			i := strings.Index(string(b), piece)
			t.Errorf("%s shows %q of a token: …%s…", filepath.Base(f), piece, b[max(i-200, 0):min(i+100, len(b))])
		}
	}
}
