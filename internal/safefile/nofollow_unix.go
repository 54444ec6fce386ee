//go:build unix

package safefile

import "syscall"

// noFollow makes OpenNoFollow refuse a symbolic link.
const noFollow = syscall.O_NOFOLLOW
