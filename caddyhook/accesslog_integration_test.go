package caddyhook

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIntegrationTokenNotInAccessLog (issue 17 item 9): no token in the
// access log for any header or URL shape; the URL shapes that carry the
// token are refused with 400.
func TestIntegrationTokenNotInAccessLog(t *testing.T) {
	in := startIngress(t, ingressOpts{hooks: "token_headers x-openclaw-token"})
	tok := itHookToken
	wake := `{"text":"x"}`
	raw := func(target string, hdr ...string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: " + in.hostPort() + "\r\nContent-Type: application/json\r\n" +
			strings.Join(append(hdr, ""), "\r\n") + "Content-Length: " + strconv.Itoa(len(wake)) + "\r\nConnection: close\r\n\r\n" + wake
	}
	for _, c := range []struct {
		name, req string
		status    int
	}{
		{"empty then filled x-service-token", raw("/hooks/wake", "X-Service-Token:", "X-Service-Token: "+tok), 401},
		{"x-openclaw-token alias", raw("/hooks/wake", "x-openclaw-token: "+tok), 200},
		{"empty then filled alias", raw("/hooks/wake", "X-OpenClaw-Token: ", "X-OpenClaw-Token: "+tok), 401},
		{";token=", raw("/hooks/wake;token="+tok, "Authorization: Bearer "+tok), 400},
		{"#token= on the wire", raw("/hooks/wake?a=1#token="+tok, "Authorization: Bearer "+tok), 400},
		{"#token= without a query", raw("/hooks/wake#token="+tok, "Authorization: Bearer "+tok), 400},
		{"?token+=", raw("/hooks/wake?token+="+tok, "Authorization: Bearer "+tok), 400},
		{"?access_token=", raw("/hooks/wake?access_token="+tok, "Authorization: Bearer "+tok), 400},
		{"token under any name", raw("/hooks/wake?x="+tok, "Authorization: Bearer "+tok), 400},
		{"percent-encoded token", raw("/hooks/wake?x="+strings.ReplaceAll(tok, "-", "%2D"), "Authorization: Bearer "+tok), 400},
		{"token as a path segment", raw("/hooks/"+tok, "Authorization: Bearer "+tok), 400},
		{"another access_token", raw("/hooks/wake?access_token=not-the-hook-token", "Authorization: Bearer "+tok), 200},
	} {
		a := rawRequest("tcp", in.hostPort(), c.req)
		if a.err != nil || a.status != c.status {
			t.Errorf("%s: %+v, want %d", c.name, a, c.status)
		}
	}
	const n = 12
	var logs string
	for deadline := time.Now().Add(answerWithin); ; {
		logs = in.logs()
		if strings.Count(logs, `"msg":"handled request"`) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := strings.Count(logs, `"msg":"handled request"`); got < n {
		t.Fatalf("%d access entries, want %d", got, n)
	}
	if strings.Contains(logs, tok) {
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, tok) {
				t.Errorf("token in the log: %s", strings.ReplaceAll(line, tok, "<TOKEN>"))
			}
		}
	}
	for _, want := range []string{`"X-Openclaw-Token":["REDACTED"]`, `access_token=REDACTED`, `/hooks/wake;token=REDACTED`, `"X-Service-Token":["REDACTED"]`} {
		if !strings.Contains(logs, want) {
			t.Errorf("access log lacks %s", want)
		}
	}
}
