package devgw

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenKeepsLiveSocket: a second gateway on the socket of a running
// one is refused (the first keeps serving); a stale socket is replaced.
func TestListenKeepsLiveSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "gwl") // short: Unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "gw.sock")
	first, err := Listen("unix/" + sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := first.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	if ln, err := Listen("unix/" + sock); err == nil || !strings.Contains(err.Error(), "in use by a running gateway") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("second Listen on a live socket: %v, want refused", err)
	}
	if c, err := net.Dial("unix", sock); err != nil {
		t.Fatalf("the first gateway lost its socket: %v", err)
	} else {
		c.Close()
	}

	// a socket file nobody serves any more (a crashed gateway) is replaced
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	again, err := Listen("unix/" + stale)
	if err != nil {
		t.Fatalf("Listen on a stale socket: %v", err)
	}
	again.Close()
	first.Close()
}
