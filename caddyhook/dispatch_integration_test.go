package caddyhook

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/safetext"
)

// TestIntegrationGatewayErrorSanitised (issue 17 item 13): a gateway's 4xx
// error text reaches the caller and the log without control or format
// characters and at most 200 bytes long.
func TestIntegrationGatewayErrorSanitised(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nasty := "bad\r\n{\"level\":\"error\",\"msg\":\"forged\"}\u202e\u0007" + strings.Repeat("é", 400)
	reply, _ := json.Marshal(map[string]any{"ok": false, "error": nasty})
	gw := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		_, _ = w.Write(reply)
	})}
	go func() { _ = gw.Serve(ln) }()
	defer gw.Close()
	in := startIngress(t, ingressOpts{gateway: ln.Addr().String(), noGW: true})
	r := in.post("/hooks/wake", `{"text":"x"}`)
	e := r.json(t)
	msg, _ := e["error"].(string)
	if r.status != 400 || !strings.HasPrefix(msg, `gateway: bad {"level":"error","msg":"forged"} éé`) || len(msg) > len("gateway: ")+safetext.MaxLen+len("…") ||
		strings.ContainsAny(msg, "\r\n\u202e\u0007") || !strings.HasSuffix(msg, "…") {
		t.Fatalf("gateway error: %d %q", r.status, msg)
	}
	var logs string
	for deadline := time.Now().Add(answerWithin); ; { // the line follows the answer
		if logs = in.logs(); strings.Contains(logs, "gateway: bad") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.HasPrefix(line, `{"level":"error","msg":"forged"`) || strings.ContainsAny(line, "\u202e\u0007") || strings.Contains(line, `\u202e`) {
			t.Fatalf("log line not sanitised: %s", line)
		}
	}
	if !strings.Contains(logs, "gateway: bad") {
		t.Fatal("no rejection line for the gateway error")
	}
}
