package cluster_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
)

const (
	keyOld = "old-cluster-signing-key-3a5c7e9b1d2f4a6c8e0b"
	keyNew = "new-cluster-signing-key-8f6d4b2a0c9e7f5d3b1a"
)

func keyring(t testing.TB, keys ...string) *cluster.Keyring {
	t.Helper()
	kr, err := cluster.NewKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// TestKeyringSealOpen: a record opens with any keyring holding the key
// it was sealed with, in the context it was sealed for, unchanged; it
// does not open otherwise.
func TestKeyringSealOpen(t *testing.T) {
	old, both, rotated, other := keyring(t, keyOld), keyring(t, keyOld, keyNew), keyring(t, keyNew, keyOld), keyring(t, keyNew)
	payload := []byte(`{"message":"hello"}`)
	sealed := old.Seal(bytes.Clone(payload), "queue", "hooks.x.queue.agent")
	if len(sealed) != len(payload)+cluster.TagSize {
		t.Fatalf("sealed %d bytes, want %d", len(sealed), len(payload)+cluster.TagSize)
	}
	for name, kr := range map[string]*cluster.Keyring{"same key": old, "old key second": rotated, "old key first": both} {
		got, ok := kr.Open(sealed, "queue", "hooks.x.queue.agent")
		if !ok || !bytes.Equal(got, payload) {
			t.Errorf("%s: open = %q, %v", name, got, ok)
		}
	}
	if rotated.Seal(nil, "k") == nil || bytes.Equal(rotated.Seal(nil, "k"), old.Seal(nil, "k")) {
		t.Error("a rotated keyring must seal with its first key")
	}
	flipped := bytes.Clone(sealed)
	flipped[3] ^= 1
	for name, tc := range map[string]struct {
		kr     *cluster.Keyring
		sealed []byte
		ctx    []string
	}{
		"other key":            {other, sealed, []string{"queue", "hooks.x.queue.agent"}},
		"other subject":        {old, sealed, []string{"queue", "hooks.x.queue.wake"}},
		"other kind":           {old, sealed, []string{"dead_letter", "hooks.x.queue.agent"}},
		"context split":        {old, sealed, []string{"queuehooks.x.queue.agent"}},
		"changed payload":      {old, flipped, []string{"queue", "hooks.x.queue.agent"}},
		"truncated":            {old, sealed[:len(sealed)-1], []string{"queue", "hooks.x.queue.agent"}},
		"unsealed":             {old, payload, []string{"queue", "hooks.x.queue.agent"}},
		"shorter than the tag": {old, sealed[:5], []string{"queue", "hooks.x.queue.agent"}},
		"no keyring":           {nil, sealed, []string{"queue", "hooks.x.queue.agent"}},
	} {
		if got, ok := tc.kr.Open(tc.sealed, tc.ctx...); ok {
			t.Errorf("%s: opened %q", name, got)
		}
	}
}

// TestNewKeyringRefuses: weak, repeated or too many keys are refused,
// each error naming the key's position and never its value.
func TestNewKeyringRefuses(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{nil, "at least one key"},
		{[]string{"short-key"}, "key: too short (9 characters)"},
		{[]string{strings.Repeat("ab", 20)}, "key: too weak"},
		{[]string{keyOld, keyOld}, "key 2 of 2: the same as key 1"},
		{[]string{keyOld, keyNew + "1", keyNew + "2", keyNew + "3", keyNew + "4"}, "at most 4 keys"},
	} {
		_, err := cluster.NewKeyring(tc.keys)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d keys: %v, want %q", len(tc.keys), err, tc.want)
			continue
		}
		for _, k := range tc.keys {
			if strings.Contains(err.Error(), k) {
				t.Errorf("error %q shows a key", err)
			}
		}
	}
	a, b := keyring(t, keyOld, keyNew), keyring(t, keyOld, keyNew)
	if a.Fingerprint() != b.Fingerprint() || a.Fingerprint() == keyring(t, keyNew, keyOld).Fingerprint() {
		t.Error("fingerprints must tell key lists apart, in order")
	}
}

// FuzzKeyringOpen: no input makes Open panic, and only sealed records
// open.
func FuzzKeyringOpen(f *testing.F) {
	kr := keyring(f, keyOld, keyNew)
	f.Add([]byte{}, "queue")
	f.Add(kr.Seal([]byte("x"), "queue"), "queue")
	f.Add(bytes.Repeat([]byte{0}, cluster.TagSize), "lock")
	f.Fuzz(func(t *testing.T, b []byte, ctx string) {
		payload, ok := kr.Open(b, ctx)
		if ok && !bytes.Equal(kr.Seal(bytes.Clone(payload), ctx), b) &&
			!bytes.Equal(keyring(t, keyNew).Seal(bytes.Clone(payload), ctx), b) {
			t.Fatalf("opened %x, which neither key sealed", b)
		}
	})
}

// BenchmarkSeal is the cost of sealing and of opening one queued event
// of a typical size (about 1 KiB) and of a large one (64 KiB); compare
// with BenchmarkAccept (the publish it is part of):
//
//	go test -run '^$' -bench 'Seal|Accept/nats-1' ./caddyhook/cluster/
func BenchmarkSeal(b *testing.B) {
	kr := keyring(b, keyOld, keyNew)
	for _, size := range []int{1 << 10, 64 << 10} {
		payload := bytes.Repeat([]byte("x"), size)
		buf := make([]byte, 0, size+cluster.TagSize)
		b.Run("seal-"+sizeName(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				buf = kr.Seal(append(buf[:0], payload...), "queue", "hooks.bench.queue.agent")
			}
		})
		sealed := kr.Seal(bytes.Clone(payload), "queue", "hooks.bench.queue.agent")
		b.Run("open-"+sizeName(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := kr.Open(sealed, "queue", "hooks.bench.queue.agent"); !ok {
					b.Fatal("does not open")
				}
			}
		})
	}
}

func sizeName(n int) string { return fmt.Sprintf("%dKiB", n>>10) }
