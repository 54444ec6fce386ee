//go:build unix

package caddyhook

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/natstest"
)

// TestSpoolLinksRefused (issue 20 item 10): every way of opening a spool
// refuses a spool.db that is a symbolic link, naming it, and leaves the
// link's target as it was: the handler's spool, the local fallback spool
// of `spool cluster`, and the CLI's offline open (list, salvage). Before:
// bbolt followed the link and wrote the queue into its target.
func TestSpoolLinksRefused(t *testing.T) {
	linked := func(t *testing.T) (dir, link, target string) {
		base := t.TempDir()
		dir, target = filepath.Join(base, "spool"), filepath.Join(base, "elsewhere.db")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		link = filepath.Join(dir, spool.DBFile)
		if err := os.Symlink(target, link); err != nil {
			t.Skipf("symlink: %v", err)
		}
		return dir, link, target
	}
	untouched := func(t *testing.T, target string) {
		t.Helper()
		if _, err := os.Lstat(target); !os.IsNotExist(err) {
			t.Fatalf("the link's target %s was created (%v)", target, err)
		}
	}
	refused := func(t *testing.T, err error, link string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), link+" is a symbolic link") {
			t.Fatalf("error %v, want one saying %s is a symbolic link", err, link)
		}
	}

	t.Run("spool", func(t *testing.T) {
		dir, link, target := linked(t)
		in := startIngress(t, ingressOpts{})
		refused(t, in.tryLoad(in.siteCaddyfile("", "http://"+in.hostPort(), "spool "+dir)), link)
		untouched(t, target)
	})

	t.Run("cluster fallback", func(t *testing.T) {
		dir, link, target := linked(t)
		nats := natstest.Run(t, natstest.Options{})
		in := startIngress(t, ingressOpts{})
		hooks := clusterLines("nats://"+nats.Addr()) + "\nspool cluster {\n deliver off\n fallback " + dir + "\n}"
		err := in.tryLoad(in.siteCaddyfile("", "http://"+in.hostPort(), hooks))
		refused(t, err, link)
		if !strings.Contains(err.Error(), "spool: fallback:") {
			t.Fatalf("error %v does not name the fallback", err)
		}
		untouched(t, target)
	})

	t.Run("CLI", func(t *testing.T) {
		dir, link, target := linked(t)
		run := func(what string) {
			t.Helper()
			for _, sub := range []string{"list", "salvage"} {
				_, errOut, err := runHooksCommand("spool", sub, "--dir", dir, "--address", noAdmin(t))
				if err == nil || !strings.Contains(errOut, link+" is a symbolic link") {
					t.Fatalf("spool %s, a link %s: %v, stderr %q; want it to say %s is a symbolic link", sub, what, err, errOut, link)
				}
			}
		}
		run("to nothing")
		untouched(t, target)
		content := []byte("not a spool\n")
		if err := os.WriteFile(target, content, 0o600); err != nil {
			t.Fatal(err)
		}
		run("to a file")
		if b, err := os.ReadFile(target); err != nil || !bytes.Equal(b, content) {
			t.Fatalf("the link's target changed: %q %v", b, err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("the link was moved or replaced: %v", err)
		}
	})
}
