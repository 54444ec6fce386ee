package eventlog

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/caddyhook/caddyhook/internal/version"
)

func TestRecordVersionAgrees(t *testing.T) {
	if RecordVersion != version.EventLogRecord {
		t.Errorf("the event log writes version %d, internal/version says %d", RecordVersion, version.EventLogRecord)
	}
}

// TestNewerEventsKept: an events.db row a newer release wrote (a
// version above RecordVersion) is kept in the file unread: not loaded,
// not deleted (not even by the retention), not overwritten by the events
// this build numbers after it; rows without a version (written before
// v0.9.0) and of this version load.
func TestNewerEventsKept(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	rows := map[uint64]string{
		3: `{"seq":3,"id":"v0","time":"` + now.Add(-time.Minute).Format(time.RFC3339Nano) + `","path":"/hooks","hook":"wake","auth":"token","status":200,"latency":1000,"body_bytes":0}`,
		5: `{"v":1,"seq":5,"id":"v1","time":"` + now.Format(time.RFC3339Nano) + `","path":"/hooks","hook":"agent","auth":"token","status":200,"latency":1000,"body_bytes":0}`,
		9: `{"v":2,"seq":9,"id":"v2","time":"2001-01-01T00:00:00Z","fields":"of a later release"}`,
	}
	db, err := bolt.Open(filepath.Join(dir, storeFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketEvents)
		if err != nil {
			return err
		}
		for k, v := range rows {
			if err := b.Put(seqKey(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}

	l, err := New(Bounds{MaxEvents: 5}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Newer(); len(got) != 1 || got[2] != 1 {
		t.Errorf("Newer() = %v, want version 2: 1", got)
	}
	p := l.List(Filter{})
	if p.Events != 2 || p.Entries[0].(EventJSON).ID != "v1" || p.Entries[1].(EventJSON).ID != "v0" {
		t.Fatalf("loaded %d events %+v, want v1 and v0", p.Events, p.Entries)
	}
	for i := range 6 { // past MaxEvents: the log evicts and deletes its own
		l.Accept(accepted("new"+string(rune('a'+i)), time.Now(), 1))
	}
	if err := l.Destruct(); err != nil {
		t.Fatal(err)
	}
	db, err = bolt.Open(filepath.Join(dir, storeFile), 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents)
		if v := b.Get(seqKey(9)); string(v) != rows[9] {
			t.Errorf("the newer row after this build ran: %q", v)
		}
		return b.ForEach(func(k, v []byte) error {
			var s storedEvent
			if err := json.Unmarshal(v, &s); err != nil {
				t.Errorf("row %x: %v", k, err)
			}
			if s.ID != "v2" && s.V != RecordVersion {
				t.Errorf("row %s written with version %d, want %d", s.ID, s.V, RecordVersion)
			}
			return nil
		})
	})
}
