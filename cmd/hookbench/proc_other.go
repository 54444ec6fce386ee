//go:build !linux

package main

import "syscall"

// childAttr has no parent-death signal outside Linux; the sink still
// exits when its stdin closes, Caddy when interrupted.
func childAttr() *syscall.SysProcAttr { return nil }
