package adminapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// recordingAdmin is a stand-in admin endpoint: it answers with status and
// body and records the last request.
type recordingAdmin struct {
	status  int
	body    string
	got     *http.Request
	gotBody string
}

func (a *recordingAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.got, a.gotBody = r, string(b)
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

// TestClientDo: a request reaches the endpoint with the client's Origin
// and a JSON body; a 2xx answer is decoded; an error answer becomes an
// *Error with Caddy's message (or the start of the body), and a closed
// address is ErrUnreachable.
func TestClientDo(t *testing.T) {
	adm := &recordingAdmin{status: http.StatusOK, body: `[{"path":"/hooks","active_lockouts":2}]`}
	srv := httptest.NewServer(adm)
	t.Cleanup(srv.Close)
	ac, err := NewClient(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	var hs []HandlerStatus
	if err := ac.Do(http.MethodPost, Prefix+"spool/dead/retry", DeadSelection{IDs: []string{"a"}}, &hs); err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Path != "/hooks" || hs[0].ActiveLockouts != 2 {
		t.Fatalf("decoded %+v", hs)
	}
	if adm.got.URL.Path != "/hooks/spool/dead/retry" || adm.got.Header.Get("Origin") != ac.Origin() ||
		adm.got.Header.Get("Content-Type") != "application/json" || adm.gotBody != `{"ids":["a"],"all":false}` {
		t.Fatalf("request %s %v %q", adm.got.URL, adm.got.Header, adm.gotBody)
	}
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{http.StatusNotFound, `{"error":"no hooks handler at path=\"/x\""}`, `admin API: no hooks handler at path="/x" (HTTP 404)`},
		{http.StatusBadGateway, "upstream\n", "admin API: upstream (HTTP 502)"},
		{http.StatusInternalServerError, strings.Repeat("x", 500), "admin API: " + strings.Repeat("x", 200) + " (HTTP 500)"},
	} {
		adm.status, adm.body = tc.status, tc.body
		err := ac.Do(http.MethodGet, Prefix, nil, nil)
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != tc.status || err.Error() != tc.want {
			t.Errorf("answer %d %q: %v, want %q", tc.status, tc.body, err, tc.want)
		}
	}
	srv.Close()
	if err := ac.Do(http.MethodGet, Prefix, nil, nil); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("closed endpoint: %v, want ErrUnreachable", err)
	}
}

// TestClientUnixSocket: an admin endpoint on a Unix socket is reached
// without an Origin header (Caddy does not check it there).
func TestClientUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "adminapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "admin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	adm := &recordingAdmin{status: http.StatusOK, body: `{"lifted":"192.0.2.1"}`}
	srv := &http.Server{Handler: adm}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	ac, err := NewClient("unix/" + sock + "|0600")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := ac.Do(http.MethodDelete, Prefix+"lockouts/192.0.2.1", nil, &got); err != nil || got["lifted"] != "192.0.2.1" {
		t.Fatalf("%v %v", got, err)
	}
	if o := adm.got.Header.Get("Origin"); o != "" {
		t.Fatalf("Origin %q sent over a Unix socket", o)
	}
}

// TestClientStream: a stream request carries Accept and Last-Event-ID;
// a refused stream is an *Error.
func TestClientStream(t *testing.T) {
	adm := &recordingAdmin{status: http.StatusOK, body: "event: lost\ndata: {}\n\n"}
	srv := httptest.NewServer(adm)
	t.Cleanup(srv.Close)
	ac, err := NewClient(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ac.Stream(context.Background(), Prefix+"events/stream", "42")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != adm.body || adm.got.Header.Get("Accept") != "text/event-stream" || adm.got.Header.Get("Last-Event-ID") != "42" {
		t.Fatalf("stream %q, request %v", b, adm.got.Header)
	}
	adm.status, adm.body = http.StatusNotFound, `{"error":"events off"}`
	if _, err := ac.Stream(context.Background(), Prefix+"events/stream", ""); err == nil || err.Error() != "admin API: events off (HTTP 404)" {
		t.Fatalf("refused stream: %v", err)
	}
}

// TestNewClientRefusesBadAddress: a port range or an unparsable address
// is refused.
func TestNewClientRefusesBadAddress(t *testing.T) {
	for _, addr := range []string{"localhost:2019-2020", "localhost:notaport"} {
		if _, err := NewClient(addr); err == nil {
			t.Errorf("NewClient(%q) accepted", addr)
		}
	}
}

// TestFromFlags: the flags AddFlags defines find the admin address as
// `caddy reload` does: --address first.
func TestFromFlags(t *testing.T) {
	fl := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fl)
	for _, name := range []string{"address", "config", "adapter"} {
		if fl.Lookup(name) == nil {
			t.Fatalf("no --%s", name)
		}
	}
	if err := fl.Parse([]string{"--address", "127.0.0.1:20190"}); err != nil {
		t.Fatal(err)
	}
	ac, addr, err := FromFlags(fl)
	if err != nil || addr != "127.0.0.1:20190" || ac.Origin() != "http://127.0.0.1:20190" {
		t.Fatalf("FromFlags: %v %q %v", ac, addr, err)
	}
}

// TestBaseFlag: --base gives the base path; --path, its former name,
// still does, and --base wins over it.
func TestBaseFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--base", "/a"}, "/a"},
		{[]string{"--path", "/b"}, "/b"},
		{[]string{"--path", "/b", "--base", "/a"}, "/a"},
	}
	for _, tt := range tests {
		fl := pflag.NewFlagSet("x", pflag.ContinueOnError)
		fl.SetOutput(io.Discard)
		AddBaseFlag(fl)
		if err := fl.Parse(tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if got := Base(fl); got != tt.want {
			t.Errorf("%v: %q, want %q", tt.args, got, tt.want)
		}
	}
	fl := pflag.NewFlagSet("x", pflag.ContinueOnError)
	AddBaseFlag(fl)
	if f := fl.Lookup("path"); f == nil || f.Deprecated == "" || !f.Hidden {
		t.Errorf("--path: %+v, want a hidden deprecated alias", f)
	}
}
