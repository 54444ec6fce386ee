package listenguard

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// procRoot is where the guard reads the sockets of this network namespace
// and their owners.
const procRoot = "/proc"

// tcpListen is the state of a listening socket in /proc/net/tcp{,6}.
const tcpListen = "0A"

// readListeners returns the listening TCP sockets of this network
// namespace and the inodes of those this process holds; ok is false
// when root has no such files. The descriptors are read before and after
// the sockets, so that a socket this process opens meanwhile is not taken
// for another's (one it closes meanwhile: see stillListening).
func readListeners(root string) (own map[uint64]bool, listeners []procListener, ok bool) {
	own = map[uint64]bool{}
	fds := filepath.Join(root, "self", "fd")
	for _, ino := range socketInodes(fds) {
		own[ino] = true
	}
	if listeners, ok = listeningSockets(root); !ok {
		return nil, nil, false
	}
	for _, ino := range socketInodes(fds) {
		own[ino] = true
	}
	return own, listeners, true
}

// listeningSockets reads /proc/self/net/tcp and tcp6.
func listeningSockets(root string) (listeners []procListener, ok bool) {
	for _, name := range []string{"tcp", "tcp6"} {
		ls, err := parseProcNet(filepath.Join(root, "self", "net", name))
		if err != nil {
			if os.IsNotExist(err) {
				continue // e.g. no IPv6
			}
			return nil, false
		}
		ok = true
		listeners = append(listeners, ls...)
	}
	return listeners, ok
}

// stillListening reports whether the socket inode still listens: a
// socket this process was closing while the descriptors were read (the
// old admin endpoint during a reload) is gone by now.
func stillListening(root string, inode uint64) bool {
	ls, _ := listeningSockets(root)
	for _, l := range ls {
		if l.inode == inode {
			return true
		}
	}
	return false
}

// parseProcNet reads the listening sockets of one /proc/net/tcp{,6} file:
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
//	0: 0100007F:1F90 00000000:0000 0A …                                      0   0       12345
//
// An address is the kernel's hex of its 32-bit words in host byte order,
// the port plain hex.
func parseProcNet(path string) ([]procListener, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []procListener
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != tcpListen {
			continue
		}
		addr, err := parseProcAddr(fields[1])
		if err != nil {
			continue
		}
		ino, err := strconv.ParseUint(fields[9], 10, 64)
		if err != nil || ino == 0 {
			continue
		}
		out = append(out, procListener{addr: addr, inode: ino})
	}
	return out, sc.Err()
}

// parseProcAddr decodes "0100007F:1F90" (IPv4) or 32 hex digits and a
// port (IPv6).
func parseProcAddr(s string) (netip.AddrPort, error) {
	host, port, ok := strings.Cut(s, ":")
	p, err := strconv.ParseUint(port, 16, 16)
	if !ok || err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(host)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	ip, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(ip.Unmap(), uint16(p)), nil
}

// socketInodes lists the socket inodes of the file descriptors in dir
// (a /proc/<pid>/fd directory); an unreadable dir has none.
func socketInodes(dir string) []uint64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []uint64
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if s, ok := strings.CutPrefix(link, "socket:["); ok {
			if ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				out = append(out, ino)
			}
		}
	}
	return out
}

// socketOwner names the processes holding the socket inode: "pid N
// (command line)", or why they cannot be named (another user's process
// is not readable).
func socketOwner(root string, inode uint64) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return "a process that cannot be named"
	}
	var owners []string
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid := e.Name()
		if _, err := strconv.Atoi(pid); err != nil || pid == self {
			continue
		}
		if slices.Contains(socketInodes(filepath.Join(root, pid, "fd")), inode) {
			owners = append(owners, "pid "+pid+" ("+commandLine(filepath.Join(root, pid, "cmdline"))+")")
		}
		if len(owners) == 3 {
			break
		}
	}
	if len(owners) == 0 {
		return "a process of another user, or one that cannot be read (socket inode " + strconv.FormatUint(inode, 10) + ")"
	}
	return strings.Join(owners, ", ")
}

// commandLine reads a /proc/<pid>/cmdline as one line of at most 200
// characters.
func commandLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "command line not readable"
	}
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.ToValidUTF8(s, "")
}

// ListenersOn counts the listening TCP sockets of this network namespace
// bound to addr; ok is false when they cannot be read. During a Caddy
// reload the replaced server's socket shares the port (SO_REUSEPORT) until
// it is closed, and the kernel hands new connections to either: one
// listener left means every new connection reaches the new config.
func ListenersOn(addr netip.AddrPort) (n int, ok bool) {
	ls, ok := listeningSockets(procRoot)
	for _, l := range ls {
		if l.addr == addr {
			n++
		}
	}
	return n, ok
}

// unixListening is the Flags of a listening socket in /proc/net/unix
// (__SO_ACCEPTCON).
const unixListening = "00010000"

// UnixListenersOn counts this process's descriptors of the listening Unix
// socket bound to path; ok is false when they cannot be read. Caddy shares
// a Unix socket across a reload by duplicating its descriptor: until the
// replaced server (its admin endpoint's too) closes its copy, either
// server takes the next connection, and one shutting down closes it
// unanswered. One descriptor left means every new connection reaches the
// new server.
func UnixListenersOn(path string) (n int, ok bool) {
	f, err := os.Open(filepath.Join(procRoot, "self", "net", "unix"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	inodes := map[uint64]bool{}
	sc := bufio.NewScanner(f)
	sc.Scan() // the header: Num RefCount Protocol Flags Type St Inode Path
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[3] != unixListening || strings.Join(fields[7:], " ") != path {
			continue
		}
		if ino, err := strconv.ParseUint(fields[6], 10, 64); err == nil {
			inodes[ino] = true
		}
	}
	if sc.Err() != nil {
		return 0, false
	}
	for _, ino := range socketInodes(filepath.Join(procRoot, "self", "fd")) {
		if inodes[ino] {
			n++
		}
	}
	return n, true
}
