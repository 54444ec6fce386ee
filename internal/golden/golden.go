// Package golden is the format of the golden fixtures that
// internal/goldengen writes with an earlier build and the golden tests
// read with today's code: what was sent (Manifest) and every record the
// build's nodes wrote to NATS, as written (Record).
package golden

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"time"
)

// Files of a fixture directory.
const (
	ManifestFile = "manifest.json"
	NATSFile     = "nats.json"
)

// Request is one request sent and its answer.
type Request struct {
	Name    string            `json:"name"`
	Node    string            `json:"node"` // spool, edge or delivery
	Path    string            `json:"path"`
	Body    string            `json:"body"`
	Header  map[string]string `json:"header,omitempty"`
	Status  int               `json:"status"`
	Reply   string            `json:"reply"`
	EventID string            `json:"event_id,omitempty"` // the runId of a spooled event's answer
}

// Record is one message a node published to NATS, as written.
type Record struct {
	Subject string              `json:"subject"`
	Header  map[string][]string `json:"header,omitempty"`
	Data    []byte              `json:"data"`
}

// Manifest is what the golden tests check the fixtures against.
type Manifest struct {
	Build      string    `json:"build"`
	Sealed     bool      `json:"sealed"`
	SigningKey string    `json:"signing_key,omitempty"`
	Namespace  string    `json:"namespace"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	Requests   []Request `json:"requests"`
	// Gateway is what the gateway answered a body marker: dead (400, its
	// reply), retry (503), anything else 200.
	Gateway map[string]string `json:"gateway"`
}

// Request returns the request named name (the first of that name).
func (m *Manifest) Request(name string) Request {
	for _, r := range m.Requests {
		if r.Name == name {
			return r
		}
	}
	return Request{}
}

// ReadManifest reads dir's manifest.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	return m, err
}

// ReadRecords reads dir's NATS records, each once (a subscriber may see a
// publish twice), in the order they were written.
func ReadRecords(dir string) ([]Record, error) {
	var recs []Record
	b, err := os.ReadFile(filepath.Join(dir, NATSFile))
	if err == nil {
		err = json.Unmarshal(b, &recs)
	}
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out := recs[:0]
	for _, r := range recs {
		k := r.Subject + "\x00" + base64.StdEncoding.EncodeToString(r.Data)
		if !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// Read reads dir's manifest and NATS records.
func Read(dir string) (Manifest, []Record, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return m, nil, err
	}
	recs, err := ReadRecords(dir)
	return m, recs, err
}

// Write writes v as indented JSON to path.
func Write(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
