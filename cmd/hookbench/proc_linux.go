package main

import "syscall"

// childAttr makes a child process die with hookbench, so a killed run
// leaves no Caddy or sink behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
