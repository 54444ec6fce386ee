//go:build openclaw

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// uuidPattern matches the run ids the gateway hands out.
var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// hookClient posts to a hooks endpoint (the gateway's or caddyhook's). It
// opens a fresh connection per request, so gateway restarts never leave it
// with a stale pooled connection, and it can send from a chosen loopback
// source address (lockout is per client address).
type hookClient struct {
	base   string // e.g. http://127.0.0.1:1234/hooks
	token  string
	client *http.Client
}

// newHookClient returns a client for base that authenticates with token
// and dials from sourceIP ("" for the default).
func newHookClient(base, token, sourceIP string) *hookClient {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if sourceIP != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(sourceIP)}
	}
	return &hookClient{
		base:  base,
		token: token,
		client: &http.Client{
			Timeout:   60 * time.Second,
			Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true},
		},
	}
}

// withToken returns a copy of c that sends token instead ("" sends none).
func (c *hookClient) withToken(token string) *hookClient {
	cp := *c
	cp.token = token
	return &cp
}

// reply is one HTTP answer, decoded when it is a JSON object.
type reply struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any // nil unless the body is a JSON object
	took   time.Duration
}

// str returns a string field of the JSON body ("" when absent).
func (r reply) str(key string) string {
	s, _ := r.json[key].(string)
	return s
}

// strs returns a string-array field of the JSON body.
func (r reply) strs(key string) []string {
	raw, _ := r.json[key].([]any)
	out := make([]string, 0, len(raw))
	for _, v := range raw {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

// num returns a numeric field of the JSON body (-1 when absent).
func (r reply) num(key string) int {
	f, ok := r.json[key].(float64)
	if !ok {
		return -1
	}
	return int(f)
}

// request describes one POST: a sub-path under base (may carry a query),
// a body (a value to encode as JSON, or raw []byte), and extra headers.
type request struct {
	sub         string
	body        any
	headers     map[string]string
	method      string // default POST
	contentType string // default application/json
}

// do sends req and reads the whole answer; a transport error is fatal.
func (c *hookClient) do(t testing.TB, req request) reply {
	t.Helper()
	r, err := c.send(req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// send sends req and reads the whole answer.
func (c *hookClient) send(req request) (reply, error) {
	var body []byte
	switch b := req.body.(type) {
	case nil:
	case []byte:
		body = b
	default:
		var err error
		if body, err = json.Marshal(b); err != nil {
			return reply{}, err
		}
	}
	method := req.method
	if method == "" {
		method = http.MethodPost
	}
	hr, err := http.NewRequest(method, c.base+req.sub, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	ct := req.contentType
	if ct == "" {
		ct = "application/json"
	}
	hr.Header.Set("Content-Type", ct)
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range req.headers {
		hr.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := c.client.Do(hr)
	if err != nil {
		return reply{took: time.Since(start)}, fmt.Errorf("%s %s: %w", method, req.sub, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: reading reply: %w", method, req.sub, err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: data, took: time.Since(start)}
	_ = json.Unmarshal(data, &r.json)
	return r, nil
}

// post is do for the common case: a JSON body and optional headers
// given as alternating name, value strings.
func (c *hookClient) post(t testing.TB, sub string, body any, headerKV ...string) reply {
	t.Helper()
	h := make(map[string]string, len(headerKV)/2)
	for i := 0; i+1 < len(headerKV); i += 2 {
		h[headerKV[i]] = headerKV[i+1]
	}
	return c.do(t, request{sub: sub, body: body, headers: h})
}

// wantStatus fails the test unless r has the given status.
func wantStatus(t testing.TB, what string, r reply, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body %.300s", what, r.status, status, r.body)
	}
}

// wantError fails unless r is {"ok":false,"error":want} with the status.
func wantError(t testing.TB, what string, r reply, status int, want string) {
	t.Helper()
	wantStatus(t, what, r, status)
	if ok, _ := r.json["ok"].(bool); ok || r.json["ok"] == nil {
		t.Fatalf("%s: body %.300s, want ok:false", what, r.body)
	}
	if want != "" && r.str("error") != want {
		t.Fatalf("%s: error %q, want %q", what, r.str("error"), want)
	}
}

// gmailPush is a Gmail-style payload with n messages whose ids carry tag.
func gmailPush(tag string, n int) map[string]any {
	msgs := make([]map[string]any, n)
	for i := range msgs {
		id := tag + "-" + strconv.Itoa(i)
		msgs[i] = map[string]any{
			"id":      id,
			"from":    "sender" + strconv.Itoa(i) + "@example.com",
			"subject": "subject " + id,
			"snippet": "snippet " + id,
			"body":    "body of " + id,
		}
	}
	return map[string]any{"messages": msgs}
}
