package transform

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// Error kinds reported by Program.Run.
const (
	KindThrow   = "throw"   // the script threw or its promise rejected
	KindTimeout = "timeout" // time budget exceeded, context done, or no runtime free in time
	KindMemory  = "memory"  // a memory guard tripped (built-in cap, allocation watchdog, result size)
	KindResult  = "result"  // the script returned something that is not a plain object or null
	KindInput   = "input"   // the Input held a value that cannot be handed to the script
)

// maxMessage bounds Error.Message.
const maxMessage = 512

// Error is a transform failure; Message is safe to log (JS error message or "timeout"/"memory limit"),
// never contains payload content beyond what the script itself put in its thrown message.
type Error struct {
	Kind    string // one of the Kind constants
	Message string
}

// Error implements error.
func (e *Error) Error() string { return "transform " + e.Kind + ": " + e.Message }

// newError builds an *Error with the message cut to maxMessage bytes.
func newError(kind, msg string) *Error {
	return &Error{Kind: kind, Message: truncate(msg, maxMessage)}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// minRedact is the shortest payload string that is redacted from messages;
// shorter ones would blank out ordinary words of the message itself.
const minRedact = 4

// maxRedactStrings bounds how many payload strings are collected.
const maxRedactStrings = 4096

// redact replaces every payload string value of minRedact or more bytes
// that occurs in msg with "[payload]". Built-in error messages of the
// runtime sometimes quote values (e.g. "<value> is not a function"); this
// keeps request content out of logs.
func redact(msg string, payload map[string]any) string {
	var found []string
	var walk func(v any)
	walk = func(v any) {
		if len(found) >= maxRedactStrings {
			return
		}
		switch x := v.(type) {
		case string:
			if len(x) >= minRedact && strings.Contains(msg, x) {
				found = append(found, x)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(payload)
	if len(found) == 0 {
		return msg
	}
	sort.Slice(found, func(i, j int) bool { return len(found[i]) > len(found[j]) })
	for _, s := range found {
		msg = strings.ReplaceAll(msg, s, "[payload]")
	}
	return msg
}
