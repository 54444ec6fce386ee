package spool

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// corruptFixture is a closed spool with acknowledged events: queued ones
// appended one per commit (the last one is the newest transaction) and
// a few dead letters.
type corruptFixture struct {
	cfg    Config
	path   string
	queued map[string][]byte // id → encoded record
	dead   map[string][]byte
}

// newCorruptFixture builds the spool; bodies are large enough that the
// queue bucket spans several leaf pages.
func newCorruptFixture(t *testing.T) *corruptFixture {
	t.Helper()
	fx := &corruptFixture{cfg: testConfig(t), queued: map[string][]byte{}, dead: map[string][]byte{}}
	fx.path = filepath.Join(fx.cfg.Dir, DBFile)
	s, err := Open(fx.cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		ev := newEvent(KindAgent, fmt.Sprintf("q%02d", i))
		ev.Body = fmt.Appendf(nil, `{"message":%q}`, strings.Repeat(fmt.Sprint(i%10), 600))
		mustAppend(t, s, ev)
		fx.queued[ev.ID] = encodeEvent(ev)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		for i := range 3 {
			ev := newEvent(KindWake, fmt.Sprintf("d%d", i))
			ev.LastError = "gateway: 400 bad request"
			fx.dead[ev.ID] = encodeEvent(ev)
			if err := tx.Bucket(deadBucket).Put(seqKey(uint64(1000+i)), fx.dead[ev.ID]); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = s.mirrorMeta()
	}
	if err != nil {
		t.Fatal(err)
	}
	last := newEvent(KindAgent, "last-acknowledged")
	mustAppend(t, s, last)
	fx.queued[last.ID] = encodeEvent(last)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return fx
}

// file reads the spool file's structure.
func (fx *corruptFixture) file(t *testing.T) *boltFile {
	t.Helper()
	b, err := os.ReadFile(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := readBoltFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// queueLeaves returns the queue bucket's leaf pages and the event ids each
// holds.
func (fx *corruptFixture) queueLeaves(t *testing.T) map[uint64][]string {
	t.Helper()
	f := fx.file(t)
	m := f.current()
	leaves := map[uint64][]string{}
	stack := []walkItem{{id: m.root}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		p := it.inline
		if p == nil {
			var err error
			if p, err = f.page(it.id, m.hwm); err != nil {
				t.Fatal(err)
			}
		}
		var ids []string
		children, err := parseTreePage(p, it, func(bucket string, _, v []byte) {
			if ev, err := decodeEvent(v); err == nil && bucket == string(queueBucket) {
				ids = append(ids, ev.ID)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) > 0 && it.inline == nil {
			leaves[it.id] = ids
		}
		stack = append(stack, children...)
	}
	if len(leaves) < 2 {
		t.Fatalf("queue bucket has %d leaf pages, want several", len(leaves))
	}
	return leaves
}

// rewrite changes the file with fn.
func (fx *corruptFixture) rewrite(t *testing.T, fn func(b []byte) []byte) []byte {
	t.Helper()
	b, err := os.ReadFile(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	b = fn(b)
	if err := os.WriteFile(fx.path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// contents returns the records of a store's queue and dead buckets by id.
func contents(t *testing.T, s *Store) (queued, dead map[string][]byte) {
	t.Helper()
	queued, dead = map[string][]byte{}, map[string][]byte{}
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, b := range []struct {
			name []byte
			into map[string][]byte
		}{{queueBucket, queued}, {deadBucket, dead}} {
			err := tx.Bucket(b.name).ForEach(func(_, v []byte) error {
				ev, err := decodeEvent(v)
				if err != nil {
					return err
				}
				b.into[ev.ID] = append([]byte(nil), v...)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return queued, dead
}

// sameRecords compares two id → record maps.
func sameRecords(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d records, want %d", what, len(got), len(want))
	}
	for id, rec := range want {
		if !bytes.Equal(got[id], rec) {
			t.Errorf("%s: event %s missing or changed", what, id)
		}
	}
}

// garbage is a deterministic page of noise.
func garbage(n int) []byte {
	r := rand.New(rand.NewPCG(17, 42))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestOpenCorruptFileNeverPanics: a garbage data page, a file truncated at
// several points and a file of noise are refused by Open with an error
// that says the file is corrupt, instead of bbolt panicking (garbage page)
// or the process dying of SIGBUS (truncation), and the file is left as it
// was.
func TestOpenCorruptFileNeverPanics(t *testing.T) {
	fx0 := newCorruptFixture(t)
	f0 := fx0.file(t)
	hwm, ps := int(f0.current().hwm), int(f0.pageSize)
	var leaf uint64
	for id := range fx0.queueLeaves(t) {
		leaf = max(leaf, id)
	}
	for _, tc := range []struct {
		name    string
		corrupt func(b []byte) []byte
		reason  string
	}{
		{"garbage data page", func(b []byte) []byte {
			copy(b[int(leaf)*ps:], garbage(ps))
			return b
		}, "page"},
		{"truncated after meta 0's fields", func(b []byte) []byte { return b[:100] }, "truncated"},
		{"truncated inside meta 0's fields", func(b []byte) []byte { return b[:40] }, "neither meta page is valid"},
		{"truncated inside meta page 1", func(b []byte) []byte { return b[:ps+100] }, "truncated"},
		{"truncated after the meta pages", func(b []byte) []byte { return b[:2*ps] }, "truncated"},
		{"truncated in the middle", func(b []byte) []byte { return b[:hwm*ps/2+7] }, "truncated"},
		{"last page cut short", func(b []byte) []byte { return b[:(hwm-1)*ps+ps/2] }, "truncated"},
		{"noise", func(b []byte) []byte { return garbage(len(b)) }, "neither meta page is valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newCorruptFixture(t)
			want := fx.rewrite(t, tc.corrupt)
			_, err := Open(fx.cfg, zap.NewNop())
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Path != fx.path {
				t.Fatalf("Open = %v, want a *CorruptError for %s", err, fx.path)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q does not say %q", err, tc.reason)
			}
			if got, _ := os.ReadFile(fx.path); !bytes.Equal(got, want) {
				t.Errorf("Open changed the corrupt file")
			}
		})
	}
}

// TestOneDamagedMetaPageLosesNothing: with either meta page zeroed or
// filled with noise, Open keeps every acknowledged event, the newest
// included (bbolt falls back to the other meta page, which the store's
// mirrored commit keeps at the latest state), logs a warning and repairs
// the page.
func TestOneDamagedMetaPageLosesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		page int
		fill func(n int) []byte
	}{
		{"zeroed meta page 0", 0, func(n int) []byte { return make([]byte, n) }},
		{"zeroed meta page 1", 1, func(n int) []byte { return make([]byte, n) }},
		{"noise in meta page 0", 0, garbage},
		{"noise in meta page 1", 1, garbage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newCorruptFixture(t)
			ps := int(fx.file(t).pageSize)
			fx.rewrite(t, func(b []byte) []byte {
				copy(b[tc.page*ps:], tc.fill(ps))
				return b
			})
			core, logs := observer.New(zapcore.WarnLevel)
			s, err := Open(fx.cfg, zap.New(core))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			queued, dead := contents(t, s)
			sameRecords(t, "queue", queued, fx.queued)
			sameRecords(t, "dead letters", dead, fx.dead)
			if st := s.Stats(); st.Depth != len(fx.queued) || st.Dead != len(fx.dead) {
				t.Errorf("stats %+v, want depth %d dead %d", st, len(fx.queued), len(fx.dead))
			}
			if logs.FilterMessageSnippet("meta page").Len() != 1 {
				t.Errorf("no warning about the damaged meta page: %v", logs.All())
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for i, m := range fx.file(t).metas {
				if m.err != nil {
					t.Errorf("meta page %d still invalid after reopening: %v", i, m.err)
				}
			}
		})
	}
}

// TestRecoverSalvages: Recover moves a corrupt file aside unchanged,
// starts a fresh spool and restores every event it can still read: all of
// them when the file was truncated past its data or had one meta page
// destroyed together with a data page elsewhere, all but those on the
// garbage page otherwise; never a changed or invented one.
func TestRecoverSalvages(t *testing.T) {
	t.Run("garbage leaf page", func(t *testing.T) {
		fx := newCorruptFixture(t)
		leaves := fx.queueLeaves(t)
		var leaf uint64
		for id := range leaves {
			leaf = max(leaf, id)
		}
		ps := int(fx.file(t).pageSize)
		damaged := fx.rewrite(t, func(b []byte) []byte {
			copy(b[int(leaf)*ps:], garbage(ps))
			return b
		})
		s, sv := recoverFixture(t, fx, damaged)
		want := maps.Clone(fx.queued)
		for _, id := range leaves[leaf] {
			delete(want, id)
		}
		queued, dead := contents(t, s)
		delete(queued, "after-recovery")
		sameRecords(t, "queue", queued, want)
		sameRecords(t, "dead letters", dead, fx.dead)
		if sv.Queued != len(want) || sv.Dead != len(fx.dead) || sv.Skipped == 0 {
			t.Errorf("salvage report %+v, want %d queued, %d dead, damage counted", sv, len(want), len(fx.dead))
		}
	})
	t.Run("noise", func(t *testing.T) {
		fx := newCorruptFixture(t)
		damaged := fx.rewrite(t, func(b []byte) []byte { return garbage(len(b)) })
		s, sv := recoverFixture(t, fx, damaged)
		if q, d := contents(t, s); len(q) != 1 || len(d) != 0 || sv.Queued+sv.Dead != 0 {
			t.Errorf("salvaged %d+%d events from noise (the one appended after recovery included)", len(q), len(d))
		}
	})
	t.Run("sound file", func(t *testing.T) {
		fx := newCorruptFixture(t)
		s, sv, err := Recover(fx.cfg, zap.NewNop())
		if err != nil || sv != nil {
			t.Fatalf("Recover of a sound file = %v, %+v", err, sv)
		}
		t.Cleanup(func() { _ = s.Close() })
		queued, _ := contents(t, s)
		sameRecords(t, "queue", queued, fx.queued)
	})
}

// recoverFixture runs Recover on a damaged fixture, checks the moved file
// and that the fresh spool takes new events (it appends one, which the
// caller sees among the queued ones).
func recoverFixture(t *testing.T, fx *corruptFixture, damaged []byte) (*Store, *Salvage) {
	t.Helper()
	s, sv, err := Recover(fx.cfg, zap.NewNop())
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if sv == nil || sv.Reason == nil || !strings.HasPrefix(filepath.Base(sv.MovedTo), DBFile+".corrupt-") {
		t.Fatalf("salvage report %+v", sv)
	}
	if got, err := os.ReadFile(sv.MovedTo); err != nil || !bytes.Equal(got, damaged) {
		t.Fatalf("moved file differs from the damaged one (%v)", err)
	}
	mustAppend(t, s, newEvent(KindWake, "after-recovery"))
	return s, sv
}

// TestCheckFindsEveryPage: on a sound file the check visits exactly the
// queue's records and passes.
func TestCheckFindsEveryPage(t *testing.T) {
	fx := newCorruptFixture(t)
	f := fx.file(t)
	var ids []string
	if err := f.walk(f.current(), true, func(bucket string, _, v []byte) {
		ev, _ := decodeEvent(v)
		ids = append(ids, bucket+"/"+ev.ID)
	}); err != nil {
		t.Fatalf("check of a sound file: %v", err)
	}
	if len(ids) != len(fx.queued)+len(fx.dead) || !slices.Contains(ids, "queue/last-acknowledged") {
		t.Fatalf("walk found %d records, want %d", len(ids), len(fx.queued)+len(fx.dead))
	}
}

// smallBoltFile builds a small bbolt file (1 KiB pages) shaped like a
// spool: a queue bucket spanning pages and an inline dead bucket.
func smallBoltFile(t testing.TB) []byte {
	path := filepath.Join(t.TempDir(), "seed.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: 1024, NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		q, _ := tx.CreateBucketIfNotExists(queueBucket)
		d, _ := tx.CreateBucketIfNotExists(deadBucket)
		for i := range 12 {
			ev := newEvent(KindAgent, fmt.Sprint("e", i))
			ev.Body = bytes.Repeat([]byte{'x'}, 100+50*i)
			if err := q.Put(seqKey(uint64(i)), encodeEvent(ev)); err != nil {
				return err
			}
		}
		return d.Put(seqKey(99), encodeEvent(newEvent(KindWake, "dead")))
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openChecked is what FuzzSpoolFileCheck and TestCheckedFilesOpenSafely
// do with one file: check and salvage it (which must never panic), and,
// when the check passes, open it with bbolt and read every record of
// every bucket, which must not panic either.
func openChecked(t *testing.T, b []byte) bool {
	bf, err := readBoltFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return false
	}
	salvageRecords(bf)
	if bf.check(bf.current()) != nil {
		return false
	}
	path := filepath.Join(t.TempDir(), "f.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("the check passed a file bbolt panics on: %v\n%s", r, debug.Stack())
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		return true
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error { return nil })
		})
	})
	return true
}

// TestCheckedFilesOpenSafely damages a small spool-shaped file in 1,500
// deterministic ways (random bytes, mostly in page headers and element
// tables, where bbolt trusts the file most): checking never panics, and
// bbolt opens and reads every file the check passes without panicking.
func TestCheckedFilesOpenSafely(t *testing.T) {
	seed := smallBoltFile(t)
	const ps = 1024
	r := rand.New(rand.NewPCG(3, 5))
	passed := 0
	for range 1500 {
		b := bytes.Clone(seed)
		for range 1 + r.IntN(4) {
			pos := r.IntN(len(b))
			if r.IntN(4) > 0 { // a header or element table
				pos = (2+r.IntN(len(b)/ps-2))*ps + r.IntN(pageHeaderSize+4*elemSize)
			}
			b[pos] = byte(r.Uint32())
		}
		if openChecked(t, b) {
			passed++
		}
	}
	if passed == 0 || passed == 1500 {
		t.Fatalf("%d of 1500 damaged files passed the check; the test damages nothing or everything", passed)
	}
}

// FuzzSpoolFileCheck: whatever the bytes, checking and salvaging never
// panic, and a file the check passes is one bbolt opens and reads (every
// record of every bucket) without panicking or faulting.
func FuzzSpoolFileCheck(f *testing.F) {
	seed := smallBoltFile(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	damaged := bytes.Clone(seed)
	copy(damaged[3*1024:], garbage(1024))
	f.Add(damaged)
	f.Fuzz(func(t *testing.T, b []byte) { openChecked(t, b) })
}
