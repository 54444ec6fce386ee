package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// buildCaddy builds ./cmd/caddy (Caddy + caddyhook) into dir.
func buildCaddy(dir string) (string, error) {
	bin := filepath.Join(dir, "caddy")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/caddyhook/caddyhook/cmd/caddy")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building cmd/caddy (run hookbench from the caddyhook module, or pass -caddy): %w", err)
	}
	return bin, nil
}

// ingress is the Caddy process under test.
type ingress struct {
	cmd     *exec.Cmd
	admin   string // admin Unix socket
	logPath string
	exited  chan struct{}
}

// startIngress runs `caddy run` on the Caddyfile at path, handing it the
// listening sockets files (fd 3, 4, …), and waits until its admin
// endpoint answers: Caddy starts that after every server.
func startIngress(bin, path, admin string, files []*os.File) (*ingress, error) {
	logPath := filepath.Join(filepath.Dir(path), "caddy.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--config", path, "--adapter", "caddyfile")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = files
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	in := &ingress{cmd: cmd, admin: admin, logPath: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(in.exited) }()
	if err := waitAdmin(admin, in.exited, 60*time.Second); err != nil {
		in.stop()
		return nil, fmt.Errorf("caddy did not start: %w\n%s", err, tail(logPath, 20))
	}
	return in, nil
}

// waitAdmin polls the admin endpoint on the Unix socket until it answers,
// the process exits or the timeout passes.
func waitAdmin(sock string, exited <-chan struct{}, timeout time.Duration) error {
	c := unixClient(sock, time.Second)
	end := time.Now().Add(timeout)
	for {
		resp, err := c.Get("http://admin/config/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("admin answered %s", resp.Status)
		}
		select {
		case <-exited:
			return errors.New("process exited")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(end) {
			return fmt.Errorf("admin endpoint %s: %w", sock, err)
		}
	}
}

// stop interrupts Caddy and waits for it (killing it after 10 s).
func (in *ingress) stop() { interrupt(in.cmd, in.exited) }

// interrupt interrupts a child process and waits until exited is closed,
// killing it after 10 s.
func interrupt(cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// pid is the Caddy process id.
func (in *ingress) pid() int { return in.cmd.Process.Pid }

// rss returns the process's resident set size in bytes.
func (in *ingress) rss() (int64, error) { return readRSS(in.pid()) }

// readRSS reads VmRSS from /proc/<pid>/status.
func readRSS(pid int) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmRSS(f)
}

// parseVmRSS finds the VmRSS line ("VmRSS:   12345 kB") of a status file.
func parseVmRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmRSS line")
}

// cpuProfile fetches a CPU profile of seconds from Caddy's admin endpoint
// (/debug/pprof/profile) and writes it to out.
func (in *ingress) cpuProfile(ctx context.Context, seconds int, out string) error {
	c := unixClient(in.admin, time.Duration(seconds+30)*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://admin/debug/pprof/profile?seconds="+strconv.Itoa(seconds), nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("admin answered %s: %s", resp.Status, bytes.TrimSpace(data[:min(len(data), 200)]))
	}
	return os.WriteFile(out, data, 0o644)
}

// unixClient is an HTTP client that dials the Unix socket path.
func unixClient(path string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
