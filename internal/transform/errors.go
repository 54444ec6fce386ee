package transform

import (
	"encoding/json"
	"sort"
	"strings"
	"unicode"
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

// Error is a transform failure; Message is safe to log: the kind of limit
// that stopped the call, or a script error's type and sanitized message
// (see sanitize) with its location, never payload content.
type Error struct {
	Kind    string // one of the Kind constants
	Message string

	heap bool // a heap stop that others' allocations may have caused (see heapRetries)
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

// minRedact is the shortest payload string or key that is redacted
// wherever it occurs in a message; shorter ones are redacted where they
// stand as a whole word, as they would otherwise blank out parts of
// ordinary words.
const minRedact = 4

// maxRedactTokens bounds how many payload strings and keys are collected.
const maxRedactTokens = 4096

// maxScriptText bounds the script-provided part of a message (a thrown
// value or a runtime error about script values), before the location.
const maxScriptText = 256

// sanitize makes the text of a script error safe to log: the runtime's
// built-in messages quote values (`Cannot read property 'k' of undefined`,
// `42 is not a function`, JSON.parse quoting the offending character),
// and a script may throw payload content. It replaces every payload
// string and object key (also in its JSON-escaped form) with "[payload]",
// empties every quoted fragment, masks every digit with "#", replaces
// control and format characters with spaces, and caps the result at
// maxScriptText bytes. What remains is the error's type and the words of
// its message; the location (file:line:column) is added by the caller.
func sanitize(msg string, payload map[string]any) string {
	msg = redactTokens(msg, payload)
	var b strings.Builder
	b.Grow(len(msg))
	var quote rune
	for _, r := range msg {
		switch {
		case quote != 0:
			if r == quote {
				b.WriteString("…")
				b.WriteRune(r)
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			b.WriteRune(r)
			quote = r
		case r >= '0' && r <= '9':
			b.WriteByte('#')
		case unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError:
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	if quote != 0 { // unterminated: its content is dropped too
		b.WriteString("…")
	}
	return truncate(b.String(), maxScriptText)
}

// redactTokens replaces payload strings and keys found in msg.
func redactTokens(msg string, payload map[string]any) string {
	var long, short []string
	seen := map[string]bool{}
	add := func(s string) {
		if s == "" || seen[s] || len(long)+len(short) >= maxRedactTokens {
			return
		}
		seen[s] = true
		forms := []string{s}
		if q, err := json.Marshal(s); err == nil && string(q[1:len(q)-1]) != s {
			forms = append(forms, string(q[1:len(q)-1]))
		}
		for _, f := range forms {
			switch {
			case len(f) >= minRedact && strings.Contains(msg, f):
				long = append(long, f)
			case len(f) < minRedact && strings.Contains(msg, f):
				short = append(short, f)
			}
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			add(x)
		case map[string]any:
			for k, e := range x {
				add(k)
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(payload)
	sort.Slice(long, func(i, j int) bool { return len(long[i]) > len(long[j]) })
	for _, s := range long {
		msg = strings.ReplaceAll(msg, s, "[payload]")
	}
	for _, s := range short {
		msg = replaceWord(msg, s, "[payload]")
	}
	return msg
}

// replaceWord replaces the occurrences of word in s that are not part of a
// longer word (letters, digits, underscore).
func replaceWord(s, word, with string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, word)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(word)
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[end:])
		b.WriteString(s[:i])
		if (i == 0 || !isWordRune(before)) && (end == len(s) || !isWordRune(after)) {
			b.WriteString(with)
		} else {
			b.WriteString(word)
		}
		s = s[end:]
	}
}

// isWordRune reports letters, digits and underscore.
func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}
