//go:build chaos || upgrade

package caddyhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/loopstore"
)

// What the tests that run a real three-server NATS cluster share (the
// fault run, build tag chaos; the upgrade run, build tag upgrade): the
// nats-server processes, and the tally of what the gateway received.

// buildNatsDev builds cmd/natsdev (a nats-server that reports its
// listeners in a ready file) into a temp dir.
func buildNatsDev(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "natsdev")
	build := exec.Command("go", "build", "-o", bin, "./cmd/natsdev")
	build.Dir = ".." // the module root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/natsdev: %v\n%s", err, out)
	}
	return bin
}

// natsProc is one nats-server process (cmd/natsdev) that the test can
// kill, stop and start again on its store.
type natsProc struct {
	t      *testing.T
	bin    string
	name   string
	dir    string
	store  *loopstore.Store // where JetStream's files go when set (the fault run freezes it), else dir/store
	routes string
	runs   int
	proc   *os.Process
	exited chan error
	ready  struct{ Client, Route, Monitor string }
}

func (n *natsProc) start() {
	n.t.Helper()
	n.runs++
	readyFile := filepath.Join(n.dir, "ready.json")
	_ = os.Remove(readyFile)
	logf, err := os.Create(filepath.Join(n.dir, fmt.Sprintf("nats-run%d.log", n.runs)))
	if err != nil {
		n.t.Fatal(err)
	}
	defer logf.Close()
	store := filepath.Join(n.dir, "store")
	if n.store != nil {
		store = n.store.Dir
	}
	cmd := exec.Command(n.bin, "-name", n.name, "-listen", "127.0.0.1:0", "-store", store,
		"-sync", "always", "-cluster", "127.0.0.1:0", "-cluster-name", "chaos", "-routes", n.routes, "-no-advertise",
		"-monitor", "127.0.0.1:0", "-ready", readyFile)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the test (nor holds its store)
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.proc, n.exited = cmd.Process, make(chan error, 1)
	go func(exited chan<- error) { exited <- cmd.Wait() }(n.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(readyFile); err == nil && json.Unmarshal(b, &n.ready) == nil {
			return
		}
		select {
		case err := <-n.exited:
			n.t.Fatalf("%s exited while starting: %v", n.name, err)
		default:
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s not ready after 30s", n.name)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

func (n *natsProc) kill() {
	_ = n.proc.Kill()
	<-n.exited
	n.proc = nil
}

func (n *natsProc) stop() {
	if n.proc == nil {
		return
	}
	_ = n.proc.Signal(syscall.SIGCONT)
	_ = n.proc.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		_ = n.proc.Kill()
		<-n.exited
	}
	n.proc = nil
}

// delivered is, by request name, the Idempotency-Keys of the wake and
// agent deliveries the gateway answered 200.
func delivered(gw *testGateway) map[string][]string {
	out := map[string][]string{}
	for _, rec := range gw.Received() {
		if rec.Status != http.StatusOK {
			continue
		}
		text, _ := rec.Body["message"].(string)
		if text == "" {
			text, _ = rec.Body["text"].(string)
		}
		if m := messageName.FindStringSubmatch(text); m != nil {
			out[m[1]] = append(out[m[1]], rec.IdempotencyKey)
		}
	}
	return out
}

// duplicated reports whether name was delivered more than once (keys are
// the Idempotency-Keys of its deliveries), and fails t when those
// deliveries carried different keys: the gateway would run it twice.
func duplicated(t *testing.T, name string, keys []string) bool {
	t.Helper()
	if len(keys) < 2 {
		return false
	}
	if distinct := slices.Compact(slices.Sorted(slices.Values(keys))); len(distinct) != 1 {
		t.Errorf("%s delivered %d times with different Idempotency-Keys %v", name, len(keys), distinct)
	}
	return true
}
