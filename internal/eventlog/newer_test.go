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

// TestOperatorRowsRoundTrip: an operator's action is written as version
// 2 (an event as 1) and read back as it was, after a restart.
func TestOperatorRowsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l, err := New(Bounds{}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	l.Accept(accepted("ev1", now, 1))
	l.Operator(&Event{ID: "op1", Time: now, Path: "/hooks", Auth: "operator", Status: 200, Action: "drop",
		Operator: "alice", Target: "2 dead letters", Reason: "dropped 2"})
	if err := l.Destruct(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, storeFile), 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]int{}
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEvents).ForEach(func(_, v []byte) error {
			var s storedEvent
			_ = json.Unmarshal(v, &s)
			versions[s.ID] = s.V
			return nil
		})
	})
	_ = db.Close()
	if versions["ev1"] != 1 || versions["op1"] != 2 {
		t.Errorf("versions written %v, want ev1:1 op1:2", versions)
	}
	l, err = New(Bounds{}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Destruct()
	p := l.List(Filter{})
	if len(p.Entries) != 2 {
		t.Fatalf("%d entries after the restart, want 2", len(p.Entries))
	}
	op := p.Entries[0].(EventJSON)
	if op.Type != TypeOperator || op.Action != "drop" || op.Operator != "alice" || op.Target != "2 dead letters" || op.Reason != "dropped 2" {
		t.Errorf("the operator's action read back as %+v", op)
	}
	if got := l.List(Filter{Status: TypeOperator}); len(got.Entries) != 1 {
		t.Errorf("status=operator lists %d entries, want 1", len(got.Entries))
	}
	if got := l.List(Filter{Status: "accepted"}); len(got.Entries) != 1 || got.Entries[0].(EventJSON).ID != "ev1" {
		t.Errorf("status=accepted lists %+v, want the event alone", got.Entries)
	}
	if r := l.Rates(now); r.Accepted[len(r.Accepted)-1] > 0.11 {
		t.Errorf("the operator's action counted in the rates: %v", r.Accepted[len(r.Accepted)-1])
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
		9: `{"v":3,"seq":9,"id":"v3","time":"2001-01-01T00:00:00Z","fields":"of a later release"}`,
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
	if got := l.Newer(); len(got) != 1 || got[3] != 1 {
		t.Errorf("Newer() = %v, want version 3: 1", got)
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
			if s.ID != "v3" && s.V != eventVersion {
				t.Errorf("row %s written with version %d, want %d", s.ID, s.V, eventVersion)
			}
			return nil
		})
	})
}
