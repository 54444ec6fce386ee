//go:build !linux

package listenguard

import "net/netip"

// procRoot is unused outside Linux: there is no /proc to read.
const procRoot = ""

// readListeners reports that the listeners cannot be read here.
func readListeners(string) (map[uint64]bool, []procListener, bool) { return nil, nil, false }

// socketOwner is never called outside Linux.
func socketOwner(string, uint64) string { return "another process" }

// stillListening is never called outside Linux.
func stillListening(string, uint64) bool { return false }

// ListenersOn reports that the listeners cannot be read here.
func ListenersOn(netip.AddrPort) (int, bool) { return 0, false }

// UnixListenersOn reports that the listeners cannot be read here.
func UnixListenersOn(string) (int, bool) { return 0, false }
