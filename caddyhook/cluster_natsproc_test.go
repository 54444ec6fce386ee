//go:build chaos || upgrade

package caddyhook

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The nats-server processes of the tests that run a real three-server
// cluster (the fault run, build tag chaos; the upgrade run, build tag
// upgrade).

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
	cmd := exec.Command(n.bin, "-name", n.name, "-listen", "127.0.0.1:0", "-store", filepath.Join(n.dir, "store"),
		"-sync", "always", "-cluster", "127.0.0.1:0", "-cluster-name", "chaos", "-routes", n.routes, "-no-advertise",
		"-monitor", "127.0.0.1:0", "-ready", readyFile)
	cmd.Stdout, cmd.Stderr = logf, logf
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
