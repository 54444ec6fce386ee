package spool

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/caddyhook/caddyhook/internal/testkit"
	"github.com/caddyhook/caddyhook/internal/version"
)

// TestCodecVersionsAgree: the record versions this package writes are
// the table's (internal/version).
func TestCodecVersionsAgree(t *testing.T) {
	if codecVersionV2 != version.SpoolRecord {
		t.Errorf("spool writes record version %d, internal/version says %d", codecVersionV2, version.SpoolRecord)
	}
}

// newerRecord is a record as a later release might write it: a version
// this build does not know, then anything.
func newerRecord(v byte) []byte { return append([]byte{v}, "fields of a later release"...) }

// TestNewerRecordsKept: records of a newer version (a rollback from a
// later release) are kept where they are: not delivered, not listed, not
// retried or dropped with "all", still in the file after this build
// closed it, counted by Newer; the records beside them are delivered.
func TestNewerRecordsKept(t *testing.T) {
	cfg := testConfig(t)
	s := openTest(t, cfg)
	mustAppend(t, s, newEvent(KindAgent, "before"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// a later release queued one event and dead-lettered another
	path := filepath.Join(cfg.Dir, DBFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		q, d := tx.Bucket(queueBucket), tx.Bucket(deadBucket)
		if err := q.Put(seqKey(1000), newerRecord(3)); err != nil {
			return err
		}
		return d.Put(seqKey(1001), newerRecord(9))
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()

	s2, err := Open(cfg, nil)
	if err != nil {
		t.Fatalf("Open with records of a newer release: %v", err)
	}
	if got := s2.Newer(); len(got) != 2 || got[3] != 1 || got[9] != 1 {
		t.Errorf("Newer() = %v, want version 3: 1, version 9: 1", got)
	}
	snd := &fakeSender{}
	s2.SetSender(snd)
	testkit.WaitFor(t, "the readable event delivered", func() bool { return len(snd.delivered("")) == 1 })
	dead, err := s2.DeadLetters()
	if err != nil || len(dead) != 0 {
		t.Errorf("DeadLetters: %d, %v; want none listed", len(dead), err)
	}
	if n, err := s2.Retry(); n != 0 || err != nil {
		t.Errorf("Retry all: %d, %v", n, err)
	}
	if n, err := s2.Drop(); n != 0 || err != nil {
		t.Errorf("Drop all: %d, %v", n, err)
	}
	if st := s2.Stats(); st.Depth != 0 || st.Dead != 0 {
		t.Errorf("Stats: depth %d, dead %d; want the newer records outside both", st.Depth, st.Dead)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snd.delivered(""); len(got) != 1 || got[0] != "before" {
		t.Errorf("delivered %v, want [before]", got)
	}
	// the file still holds them, byte for byte
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(queueBucket).Get(seqKey(1000)); string(v) != string(newerRecord(3)) {
			t.Errorf("queued record of version 3: %q after this build ran", v)
		}
		if v := tx.Bucket(deadBucket).Get(seqKey(1001)); string(v) != string(newerRecord(9)) {
			t.Errorf("dead letter of version 9: %q after this build ran", v)
		}
		return nil
	})
}

func TestDecodeNewer(t *testing.T) {
	for _, tc := range []struct {
		rec     []byte
		newer   int // 0: not newer
		corrupt bool
	}{
		{encodeEvent(newEvent(KindWake, "a")), 0, false},
		{newerRecord(3), 3, false},
		{newerRecord(255), 255, false},
		{newerRecord(0), 0, true},
		{nil, 0, true},
	} {
		_, err := decodeEvent(tc.rec)
		v, ok := NewerVersion(err)
		if v != tc.newer || ok != (tc.newer != 0) || errors.Is(err, errCorrupt) != tc.corrupt || errors.Is(err, ErrNewer) != ok {
			t.Errorf("%q: %v (newer %d %v), want newer %d, corrupt %v", tc.rec, err, v, ok, tc.newer, tc.corrupt)
		}
	}
}
