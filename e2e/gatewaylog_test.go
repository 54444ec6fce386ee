//go:build openclaw

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
)

// hookRunRecord is the gateway's own account of one finished hook agent
// run: its "hook agent run completed" file-log entry.
type hookRunRecord struct {
	RunID             string `json:"runId"`
	JobID             string `json:"jobId"`
	SourcePath        string `json:"sourcePath"`
	Name              string `json:"name"`
	AgentID           string `json:"agentId"`
	LogicalSessionKey string `json:"logicalSessionKey"`
	Status            string `json:"status"`
	Deliver           *bool  `json:"deliver"`
	Delivered         *bool  `json:"delivered"`
	DeliveryAttempted *bool  `json:"deliveryAttempted"`
	DeliveryError     string `json:"deliveryError"`
	Model             string `json:"model"`
	Summary           string `json:"summary"`
}

// readHookRuns parses the gateway's JSON-lines file log and returns the
// completed hook runs by run id. A missing log is no runs yet.
func readHookRuns(path string) (map[string]hookRunRecord, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[string]hookRunRecord{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	runs := map[string]hookRunRecord{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), "hook agent run completed") {
			continue
		}
		var entry struct {
			Meta json.RawMessage `json:"1"`
		}
		var rec hookRunRecord
		if json.Unmarshal(line, &entry) != nil || json.Unmarshal(entry.Meta, &rec) != nil || rec.RunID == "" {
			continue // a line written while we read it, or another shape
		}
		runs[rec.RunID] = rec
	}
	return runs, sc.Err()
}
