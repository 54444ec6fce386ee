package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/caddyhook/caddyhook/internal/eventlog"
	"github.com/caddyhook/caddyhook/internal/safetext"
)

// TopicOutcome is the topic of dispatch outcomes: a delivery node's
// outcome of each delivery attempt, an operator's retry or drop of dead
// letters. Every node applies those of the events its own event log
// holds, so that the edge that accepted an event shows what became of it.
const TopicOutcome = "outcome"

// Bounds of an outcome message.
const (
	// MaxOutcomeBytes bounds one message (before its seal): room for
	// MaxOutcomeItems outcomes whose every field is at its bound and
	// escaped.
	MaxOutcomeBytes = 64 << 10
	// MaxOutcomeItems bounds the outcomes of one message.
	MaxOutcomeItems = 16
	// MaxRunID bounds a run id carried.
	MaxRunID = 128
	// maxAttempts bounds the attempts carried.
	maxAttempts = 1 << 20
)

// Outcomes is a Backend that carries dispatch outcomes between the nodes,
// best effort (an engine may leave it out; what a node misses while it is
// cut off is not replayed).
type Outcomes interface {
	// PublishOutcomes sends b (normalized, see OutcomeBatch.Normalize) to
	// every SubscribeOutcomes of this namespace on every node.
	PublishOutcomes(b OutcomeBatch) error
	// SubscribeOutcomes calls fn with every batch published, once it is
	// opened with the cluster's keys and accepted by DecodeOutcomes; a
	// message that is not is dropped and counted (RejectedOutcome).
	SubscribeOutcomes(fn func(OutcomeBatch)) (stop func(), err error)
}

// Outcome is the state of one event (its id) as a node saw it: a
// delivery attempt's (delivered, dead, retrying, with the attempts so far,
// the gateway's status, the run id, a short error line) or an operator's
// action (queued again, dropped).
type Outcome struct {
	ID            string `json:"id"`
	State         string `json:"state"`
	Attempts      int    `json:"attempts,omitempty"`
	GatewayStatus int    `json:"status,omitempty"`
	RunID         string `json:"run_id,omitempty"`
	Error         string `json:"error,omitempty"`
}

// OutcomeBatch is the outcomes one node saw at one time.
type OutcomeBatch struct {
	Node  string
	Time  time.Time
	Items []Outcome
	// From and N number a message of version 2: its sender's id (16
	// lower-case hex digits, random per run) and the sender's message
	// number, from 1 (OutcomeSender sets them). A batch without them is
	// a message of version 1, which has no number.
	From string
	N    uint64
}

// outcomeStates are the states an outcome may carry (an allow-list).
var outcomeStates = map[string]bool{
	eventlog.StateDelivered: true, eventlog.StateDead: true, eventlog.StateRetrying: true,
	eventlog.StateQueued: true, eventlog.StateDropped: true,
}

var (
	outcomeIDRe   = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	outcomeNodeRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	outcomeFromRe = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// Versions of an outcome message (internal/version.OutcomeMessage is the
// newest): 1 has no number; 2 carries its sender's id and number.
const (
	outcomeV1 = 1
	outcomeV2 = 2
)

// outcomeWire is the message's JSON.
type outcomeWire struct {
	V     int       `json:"v"`
	Node  string    `json:"node"`
	MS    int64     `json:"ms"`
	From  string    `json:"from,omitempty"` // version 2
	N     uint64    `json:"n,omitempty"`    // version 2
	Items []Outcome `json:"items"`
}

// errOutcome is every reason DecodeOutcomes refuses a message for.
var errOutcome = errors.New("malformed outcome message")

// ErrNewerOutcome: an outcome message of a version newer than this build
// reads (a node of a later release sent it).
var ErrNewerOutcome = errors.New("outcome message of a newer version")

// Normalize returns b as DecodeOutcomes returns it once it has crossed:
// the node name with other characters than A-Z a-z 0-9 . _ - replaced,
// cut at 64; the time in milliseconds; each run id and error line made
// one printable line (safetext.Line), the run id cut at MaxRunID bytes.
// Items with an id or state DecodeOutcomes refuses are left out, as are
// those past MaxOutcomeItems.
func (b OutcomeBatch) Normalize() OutcomeBatch {
	out := OutcomeBatch{Node: NodeName(b.Node), Time: time.UnixMilli(b.Time.UnixMilli())}
	if outcomeFromRe.MatchString(b.From) && b.N > 0 {
		out.From, out.N = b.From, b.N
	}
	for _, o := range b.Items {
		if len(out.Items) == MaxOutcomeItems {
			break
		}
		if !outcomeIDRe.MatchString(o.ID) || !outcomeStates[o.State] {
			continue
		}
		o.Attempts = min(max(o.Attempts, 0), maxAttempts)
		if o.GatewayStatus < 100 || o.GatewayStatus > 599 {
			o.GatewayStatus = 0
		}
		o.RunID = cutRunID(safetext.Line(o.RunID))
		o.Error = safetext.Line(o.Error)
		out.Items = append(out.Items, o)
	}
	return out
}

// NodeName is a node name as it crosses the cluster: other characters
// than A-Z a-z 0-9 . _ - replaced by _, cut at 64 bytes.
func NodeName(s string) string {
	node := strings.Map(func(r rune) rune {
		if r < 0x80 && outcomeNodeRe.MatchString(string(r)) {
			return r
		}
		return '_'
	}, s)
	return node[:min(len(node), 64)]
}

// cutRunID cuts s at MaxRunID bytes on a character boundary.
func cutRunID(s string) string {
	if len(s) <= MaxRunID {
		return s
	}
	s = s[:MaxRunID]
	for len(s) > 0 && s[len(s)-1]&0xC0 == 0x80 {
		s = s[:len(s)-1]
	}
	if len(s) > 0 && s[len(s)-1] >= 0x80 {
		s = s[:len(s)-1] // a lead byte whose continuation was cut
	}
	return s
}

// EncodeOutcomes is the message of b, normalized: version 2 when b is
// numbered (From and N), else version 1; ok is false when nothing is left
// to send.
func EncodeOutcomes(b OutcomeBatch) (msg []byte, ok bool) {
	b = b.Normalize()
	if b.Node == "" || len(b.Items) == 0 {
		return nil, false
	}
	w := outcomeWire{V: outcomeV1, Node: b.Node, MS: b.Time.UnixMilli(), Items: b.Items}
	if b.From != "" {
		w.V, w.From, w.N = outcomeV2, b.From, b.N
	}
	msg, err := json.Marshal(w)
	return msg, err == nil && len(msg) <= MaxOutcomeBytes
}

// OutcomeVersion is the version an outcome message says it is (0 when it
// says none readable), for the log and metrics of a message refused.
func OutcomeVersion(msg []byte) int {
	var w struct {
		V int `json:"v"`
	}
	_ = json.Unmarshal(msg, &w)
	return w.V
}

// DecodeOutcomes is the one function that reads an outcome message from
// another node (after its seal opened): it accepts only what Normalize
// leaves as it is (a bounded node name, 1 to MaxOutcomeItems outcomes,
// ids of A-Z a-z 0-9 . _ : -, states from an allow-list, bounded
// attempts and statuses, one-line run ids and errors; in version 2 a
// sender id of 16 hex digits and a number from 1), within
// MaxOutcomeBytes, and clamps a time later than now+skew to now. A
// version newer than this build writes is refused with an error wrapping
// ErrNewerOutcome. Whether the message is fresh is OutcomeReader's to
// check.
func DecodeOutcomes(msg []byte, now time.Time, skew time.Duration) (OutcomeBatch, error) {
	if len(msg) > MaxOutcomeBytes {
		return OutcomeBatch{}, fmt.Errorf("%w: %d bytes, more than %d", errOutcome, len(msg), MaxOutcomeBytes)
	}
	var w outcomeWire
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return OutcomeBatch{}, fmt.Errorf("%w: %v", errOutcome, err)
	}
	if dec.More() {
		return OutcomeBatch{}, fmt.Errorf("%w: trailing data", errOutcome)
	}
	switch {
	case w.V > outcomeV2:
		return OutcomeBatch{}, fmt.Errorf("%w: version %d", ErrNewerOutcome, w.V)
	case w.V != outcomeV1 && w.V != outcomeV2:
		return OutcomeBatch{}, fmt.Errorf("%w: version %d", errOutcome, w.V)
	case w.V == outcomeV1 && (w.From != "" || w.N != 0):
		return OutcomeBatch{}, fmt.Errorf("%w: a number in version 1", errOutcome)
	case w.V == outcomeV2 && (!outcomeFromRe.MatchString(w.From) || w.N == 0):
		return OutcomeBatch{}, fmt.Errorf("%w: version 2 without its sender or number", errOutcome)
	case w.MS <= 0:
		return OutcomeBatch{}, fmt.Errorf("%w: no time", errOutcome)
	case len(w.Items) == 0 || len(w.Items) > MaxOutcomeItems:
		return OutcomeBatch{}, fmt.Errorf("%w: %d outcomes, want 1 to %d", errOutcome, len(w.Items), MaxOutcomeItems)
	}
	b := OutcomeBatch{Node: w.Node, Time: time.UnixMilli(w.MS), Items: w.Items, From: w.From, N: w.N}
	n := b.Normalize()
	if n.Node != b.Node || !outcomeNodeRe.MatchString(b.Node) || len(n.Items) != len(b.Items) {
		return OutcomeBatch{}, fmt.Errorf("%w: a node name, id or state out of bounds", errOutcome)
	}
	for i := range b.Items {
		if n.Items[i] != b.Items[i] {
			return OutcomeBatch{}, fmt.Errorf("%w: outcome %d out of bounds", errOutcome, i)
		}
	}
	if limit := now.Add(skew); b.Time.After(limit) {
		b.Time = now
	}
	return b, nil
}
