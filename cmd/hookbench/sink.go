package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

// sinkCountsPath is the sink's extra endpoint: what it accepted so far.
const sinkCountsPath = "/hookbench/counts"

// sinkCounts is the answer of sinkCountsPath.
type sinkCounts struct {
	Wake  int `json:"wake"`
	Agent int `json:"agent"`
}

// sinkHandler is the gateway sink: devgw, plus the counts endpoint.
type sinkHandler struct{ gw *devgw.Gateway }

// ServeHTTP answers the counts endpoint and passes the rest to devgw.
func (s sinkHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == sinkCountsPath {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sinkCounts{Wake: s.gw.Count("wake"), Agent: s.gw.Count("agent")})
		return
	}
	s.gw.ServeHTTP(w, r)
}

// serveSink runs the sink on the Unix socket path until stdin reaches EOF
// (the parent closed it or died). It is the body of the sink process.
func serveSink(path string) error {
	ln, err := devgw.Listen("unix/" + path)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           sinkHandler{devgw.New(devgw.Config{Lean: true})},
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go func() { _ = srv.Serve(ln) }()
	_, _ = io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

// sinkProc is the sink process, started from this executable so that it
// shares the machine, but not the scheduler or heap, with the generator.
type sinkProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	path   string
	exited chan struct{}
}

// startSink starts the sink on path and waits until it accepts.
func startSink(path string) (*sinkProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(filepath.Dir(path), "sink.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(exe, "-sink-listen", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &sinkProc{cmd: cmd, stdin: stdin, path: path, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	err = waitChild("sink", s.exited, logf.Name(), 10*time.Second, func() error {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitChild polls ready until it returns nil, the child exits (its log's
// tail in the error) or the timeout passes.
func waitChild(what string, exited <-chan struct{}, logPath string, timeout time.Duration, ready func() error) error {
	end := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited: %s", what, tail(logPath, 5))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s did not start: %w", what, err)
		}
	}
}

// counts asks the sink what it accepted.
func (s *sinkProc) counts() (sinkCounts, error) {
	var c sinkCounts
	resp, err := unixClient(s.path, 5*time.Second).Get("http://sink" + sinkCountsPath)
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	return c, json.NewDecoder(resp.Body).Decode(&c)
}

// stop closes the sink's stdin and waits for it to exit.
func (s *sinkProc) stop() {
	_ = s.stdin.Close()
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}
