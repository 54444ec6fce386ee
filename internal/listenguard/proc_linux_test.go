package listenguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// fakeProc writes a /proc tree: this process's sockets, the listening
// sockets of the namespace (tcp and tcp6 lines) and other processes'
// descriptors and command lines.
func fakeProc(t *testing.T, tcp, tcp6 []string, own []uint64, others map[int][]uint64) string {
	t.Helper()
	root := t.TempDir()
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	write := func(path, body string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "self", "net", "tcp"), header+strings.Join(tcp, "\n")+"\n")
	write(filepath.Join(root, "self", "net", "tcp6"), header+strings.Join(tcp6, "\n")+"\n")
	fds := func(dir string, inodes []uint64) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, ino := range append([]uint64{0}, inodes...) {
			target := fmt.Sprintf("socket:[%d]", ino)
			if i == 0 {
				target = "/dev/null" // not a socket
			}
			if err := os.Symlink(target, filepath.Join(dir, strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	fds(filepath.Join(root, "self", "fd"), own)
	for pid, inodes := range others {
		fds(filepath.Join(root, strconv.Itoa(pid), "fd"), inodes)
		write(filepath.Join(root, strconv.Itoa(pid), "cmdline"), "caddy\x00run\x00--config\x00/etc/caddy/Caddyfile\x00")
	}
	return root
}

// procLine is a /proc/net/tcp line of a socket in state st.
func procLine(local, st string, inode uint64) string {
	return fmt.Sprintf("   0: %s 00000000:0000 %s 00000000:00000000 00:00000000 00000000     0        0 %d 1 0000000000000000 100 0 0 10 0", local, st, inode)
}

// TestSharedListenersFromProc (issue 25 item 3): the guard finds another
// process listening where this config will (the same address, or either
// on every interface, IPv4 or IPv6), names it, and never counts this
// process's own sockets (a reload, in-process instances), port 0,
// sockets that are not listening, or other ports.
func TestSharedListenersFromProc(t *testing.T) {
	// 127.0.0.1:8080 (4242), 0.0.0.0:9090 (4243), [::]:7070 (4244); this
	// process: 127.0.0.1:2019 (inode 10, also held by pid 4245) and a
	// connection 127.0.0.1:6060 (not listening, 4246)
	tcp := []string{
		procLine("0100007F:1F90", "0A", 100),
		procLine("00000000:2382", "0A", 101),
		procLine("0100007F:07E3", "0A", 10),
		procLine("0100007F:17AC", "01", 102),
	}
	tcp6 := []string{procLine("00000000000000000000000000000000:1B9E", "0A", 103)}
	root := fakeProc(t, tcp, tcp6, []uint64{10}, map[int][]uint64{4242: {100}, 4243: {101}, 4244: {103}, 4245: {10}, 4246: {102}})
	for _, tc := range []struct {
		listen string
		want   string // "" = no conflict
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080 (listen address 127.0.0.1:8080 of server srv0) by pid 4242 (caddy run --config /etc/caddy/Caddyfile)"},
		{":8080", "[::]:8080 (listen address :8080 of server srv0) by pid 4242"},
		{"tcp/127.0.0.1:8079-8081", "127.0.0.1:8080 (listen address tcp/127.0.0.1:8079-8081 of server srv0) by pid 4242"},
		{"127.0.0.2:9090", "127.0.0.2:9090 (listen address 127.0.0.2:9090 of server srv0) by pid 4243"},
		{"[::1]:7070", "[::1]:7070 (listen address [::1]:7070 of server srv0) by pid 4244"},
		{"127.0.0.2:8080", ""}, // another IP, neither on every interface
		{"127.0.0.1:2019", ""}, // this process's own socket
		{"127.0.0.1:6060", ""}, // a connection, not a listener
		{"127.0.0.1:0", ""},
		{"unix//run/caddy.sock", ""},
		{"fd/3", ""},
	} {
		err := checkSharedListeners(root, []guardedSite{{server: "srv0", addr: tc.listen}})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want no conflict", tc.listen, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want it to name %q", tc.listen, err, tc.want)
		}
	}
	// this process's own listener on an address another process shares:
	// the admin endpoint case
	tcp = append(tcp, procLine("0100007F:07E3", "0A", 104))
	root = fakeProc(t, tcp, tcp6, []uint64{10}, map[int][]uint64{4247: {104}})
	err := checkSharedListeners(root, nil)
	if want := "127.0.0.1:2019 (the admin endpoint, or another listener of this Caddy) by pid 4247"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("own listener shared: %v, want %q", err, want)
	}
	// no /proc: nothing to check
	if err := checkSharedListeners(t.TempDir(), []guardedSite{{"srv0", "127.0.0.1:8080"}}); err != nil {
		t.Fatalf("without /proc: %v", err)
	}
}

// TestListenersOn counts the real sockets sharing a port, as a Caddy
// reload's old and new servers do (SO_REUSEPORT): two, then one after
// the first closes, then none.
func TestListenersOn(t *testing.T) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, 0xf /* SO_REUSEPORT */, 1) })
		return errors.Join(err, serr)
	}}
	first, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(first.Addr().String())
	second, err := lc.Listen(context.Background(), "tcp4", addr.String())
	if err != nil {
		_ = first.Close()
		t.Fatal(err)
	}
	closeInTurn(t, "ListenersOn("+addr.String()+")", first, second, func() (int, bool) { return ListenersOn(addr) })
}

// closeInTurn checks count (named what) with two listeners on one
// address open, then after the first closes, then after the second: 2, 1
// and 0.
func closeInTurn(t *testing.T, what string, first, second net.Listener, count func() (int, bool)) {
	t.Helper()
	for _, step := range []struct {
		close net.Listener
		want  int
	}{{nil, 2}, {first, 1}, {second, 0}} {
		if step.close != nil {
			_ = step.close.Close()
		}
		if n, ok := count(); !ok || n != step.want {
			t.Fatalf("%s = %d, %v; want %d", what, n, ok, step.want)
		}
	}
}

// TestUnixListenersOn counts the descriptors of a real listening Unix
// socket, duplicated as Caddy shares one across a reload (the old admin
// endpoint and the new): two, then one after the first closes, then none;
// connections accepted on it are not listeners.
func TestUnixListenersOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	first, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	first.(*net.UnixListener).SetUnlinkOnClose(false)
	f, err := first.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	second, err := net.FileListener(f) // a duplicate of the descriptor
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	accepted, err := second.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()
	closeInTurn(t, "UnixListenersOn("+path+")", first, second, func() (int, bool) { return UnixListenersOn(path) })
}
