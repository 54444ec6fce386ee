// Package version is the one source of caddyhook's release version, of
// the cluster level it runs at, of the admin API's version and of the
// versions of every format it stores or sends: what `caddy hooks
// version`, the admin API (GET /hooks/version), the /metrics build info
// and the compatibility promise (docs/upgrades.md) show. The readers of each format
// (caddyhook/spool, internal/eventlog, caddyhook/cluster and its engines)
// check that their own constants agree with this table (their tests).
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is this release. It follows semantic versioning: v0.9.0 is the
// first numbered release; the stored and wire formats follow the
// compatibility promise (docs/upgrades.md) from it on,
// while the Go API of the exported packages may still change in a minor
// release until v1.
const Version = "v0.9.0"

// Module is the Go module path.
const Module = "github.com/caddyhook/caddyhook"

// ClusterLevel is the cluster feature level this build runs at: each node
// announces it with its membership, and a behaviour that older nodes
// cannot follow turns on only once every live node announces at least the
// level that introduced it (the cluster version gate). Builds before
// v0.9.0 announce none: level 0.
//
//	0  every build before v0.9.0
//	1  v0.9.0: outcome messages numbered per sender (version 2) and refused
//	   when replayed; lock records and idempotency claims without their
//	   write time refused
//	2  v0.9.0: answers the cluster view's requests (the event list, an
//	   event, the rates, the delivery health and the live tail of every
//	   node, from any node)
const ClusterLevel = 2

// API is the admin API's version: every answer carries it in the
// Hooks-Api-Version header. Within one version fields are only added.
const API = 1

// APIHeader is the header of the admin API's version.
const APIHeader = "Hooks-Api-Version"

// Store names: the label `store` of caddy_hooks_records_unreadable_total
// and the first column of Formats.
const (
	StoreSpool       = "spool"
	StoreEventLog    = "eventlog"
	StoreQueue       = "queue"
	StoreDeadLetter  = "dead_letter"
	StoreIdempotency = "idempotency"
	StoreLock        = "lock"
	StoreFailures    = "failures"
	StoreMembers     = "members"
	StoreLease       = "lease"
	StoreOutcome     = "outcome"
	StoreView        = "view"
	StoreAdminAPI    = "admin_api"
)

// Format versions written by this build (the readers' constants equal
// these; see each package's tests).
const (
	SpoolRecord       = 2 // a spool.db record: 1, or 2 with extension fields
	EventLogRecord    = 2 // an events.db row ("v"; rows without it are 0): an event 1, an operator's action 2
	QueueRecord       = 2 // a queued event or dead letter: the sealed spool record (its own version 1 or 2)
	IdempotencyRecord = 2 // an idempotency record ("v"; sealed without it: 1; unsealed: 0)
	ClusterEnvelope   = 2 // failures, confirmations, announcements and lock records
	LeaseRecord       = 2 // the wake lane's lease (state, node, write time)
	OutcomeMessage    = 2 // dispatch outcomes (1 while the cluster level is 0)
	ViewMessage       = 1 // the cluster view's requests, answers and tail batches
)

// Format is one stored or wire format: what it is, the version this build
// writes and the oldest one it reads.
type Format struct {
	Store  string `json:"store"`          // the store label
	What   string `json:"what"`           // where it lives
	Writes int    `json:"writes"`         // the version written
	Reads  int    `json:"reads_from"`     // the oldest version read
	Note   string `json:"note,omitempty"` // conditions on reading or writing
}

// Formats lists every format, in the order docs/upgrades.md shows them.
func Formats() []Format {
	return []Format{
		{StoreSpool, "spool.db: a queued event or dead letter", SpoolRecord, 1, "1 is written when no extension field is set"},
		{StoreEventLog, "events.db: an event of the event log", EventLogRecord, 0,
			"0: a row without \"v\" (before v0.9.0); an event is written as 1, an operator's action as 2"},
		{StoreQueue, "NATS: a queued event (the spool record, sealed)", QueueRecord, 0,
			"0: an unsealed message of a release without signing_key, read until accept_unsealed_until"},
		{StoreDeadLetter, "NATS: a dead letter (as a queued event)", QueueRecord, 0, "as queue"},
		{StoreIdempotency, "NATS: an idempotency claim or reply", IdempotencyRecord, 0,
			"0: unsealed, read until accept_unsealed_until; 1: sealed, before v0.9.0"},
		{StoreLock, "NATS: a lock record", ClusterEnvelope, ClusterEnvelope,
			"its number is its write time from v0.9.0; one without is refused from cluster level 1"},
		{StoreFailures, "NATS: a batch of failures or its confirmation", ClusterEnvelope, ClusterEnvelope, ""},
		{StoreMembers, "NATS: a member's announcement", ClusterEnvelope, ClusterEnvelope, "carries the node's cluster level"},
		{StoreLease, "NATS: the wake lane's lease", LeaseRecord, 1, "1: without its write time (before v0.9.0)"},
		{StoreOutcome, "NATS: dispatch outcomes for the event logs", OutcomeMessage, 1,
			"2 is written, and 1 refused, once every live node runs at cluster level 1"},
		{StoreView, "NATS: the cluster view's requests, answers and tail batches", ViewMessage, ViewMessage,
			"a node below cluster level 2 answers none: it is named as not answering"},
		{StoreAdminAPI, "the admin API's JSON (header " + APIHeader + ")", API, API, "fields are only added within a version"},
	}
}

// Build is what the running binary knows of how it was built.
type Build struct {
	Version      string `json:"version"`       // Version
	ClusterLevel int    `json:"cluster_level"` // ClusterLevel
	API          int    `json:"api"`           // API
	// Module is this module's version as Go recorded it in the binary:
	// the required version when caddyhook is a dependency (an xcaddy
	// build), the VCS tag or pseudo-version (Go 1.24+), or "(devel)",
	// when it is the main module.
	Module    string `json:"module,omitempty"`
	Revision  string `json:"revision,omitempty"` // the VCS revision of a build from a checkout
	Modified  bool   `json:"modified,omitempty"` // the checkout had uncommitted changes
	GoVersion string `json:"go"`
}

// Info reads the running binary's build information.
func Info() Build {
	b := Build{Version: Version, ClusterLevel: ClusterLevel, API: API, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	return fromBuildInfo(b, bi)
}

// fromBuildInfo fills b from bi.
func fromBuildInfo(b Build, bi *debug.BuildInfo) Build {
	if bi.Main.Path == Module {
		b.Module = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		return b
	}
	for _, d := range bi.Deps {
		if d.Path == Module {
			b.Module = d.Version
			if d.Replace != nil {
				b.Module += " => " + d.Replace.Path
				if d.Replace.Version != "" && d.Replace.Version != "(devel)" {
					b.Module += " " + d.Replace.Version
				}
			}
		}
	}
	return b
}

// String is the one line `caddy hooks version` prints first.
func (b Build) String() string {
	var s strings.Builder
	s.WriteString("caddyhook " + b.Version)
	if b.Module != "" && b.Module != b.Version {
		s.WriteString(" (module " + b.Module + ")")
	}
	if b.Revision != "" {
		s.WriteString(" revision " + b.Revision[:min(len(b.Revision), 12)])
		if b.Modified {
			s.WriteString("+modified")
		}
	}
	s.WriteString(" " + b.GoVersion)
	return s.String()
}
