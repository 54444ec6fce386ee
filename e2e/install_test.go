//go:build openclaw

package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Environment variables that point the harness at an existing installation
// instead of running the installer.
const (
	envOpenclawBin = "CADDYHOOK_OPENCLAW_BIN" // path of openclaw.mjs
	envNodeBin     = "CADDYHOOK_NODE_BIN"     // path of a Node ≥ 24 binary
)

// installation locates the gateway: the Node binary that runs it and the
// openclaw entry script.
type installation struct {
	node     string
	openclaw string
	took     time.Duration // time spent installing or locating
}

// repoRoot returns the module root (the parent of this package).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found above the e2e package: %v", err)
	}
	return root
}

// locateOpenclaw returns the installation named by the environment, or runs
// .ci/openclaw.sh (which installs into its cache or reuses it) and reads the
// paths it prints. Any failure is fatal: a missing gateway must fail the run
// loudly, never skip it.
func locateOpenclaw(t testing.TB) installation {
	t.Helper()
	start := time.Now()
	if bin := os.Getenv(envOpenclawBin); bin != "" {
		node := os.Getenv(envNodeBin)
		if node == "" {
			var err error
			if node, err = exec.LookPath("node"); err != nil {
				t.Fatalf("%s is set but %s is not and no node is on PATH", envOpenclawBin, envNodeBin)
			}
		}
		for _, p := range []string{bin, node} {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("gateway installation: %v", err)
			}
		}
		return installation{node: node, openclaw: bin, took: time.Since(start)}
	}

	script := filepath.Join(repoRoot(t), ".ci", "openclaw.sh")
	cmd := exec.Command("bash", script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s failed (%v); the real-gateway cases cannot run:\n%s%s", script, err, stdout.String(), stderr.String())
	}
	inst := installation{took: time.Since(start)}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, envNodeBin+"="):
			inst.node = strings.TrimPrefix(line, envNodeBin+"=")
		case strings.HasPrefix(line, envOpenclawBin+"="):
			inst.openclaw = strings.TrimPrefix(line, envOpenclawBin+"=")
		default:
			t.Log(line)
		}
	}
	if inst.node == "" || inst.openclaw == "" {
		t.Fatalf("%s printed no %s/%s lines:\n%s", script, envNodeBin, envOpenclawBin, stdout.String())
	}
	return inst
}

// version runs `openclaw --version` and returns its first line.
func (in installation) version(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(in.node, in.openclaw, "--version").Output()
	if err != nil {
		t.Fatalf("openclaw --version: %v", err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}
