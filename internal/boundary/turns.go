package boundary

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A role-turn label in content gets these around it, its own spelling
// kept: "Human: hi" becomes "⟦Human⟧: hi". Like the marker replacements,
// they are not square brackets, which the gateway's injection patterns
// look for around role names.
const (
	roleOpen  = "⟦"
	roleClose = "⟧"
)

// roleNames are the roles whose labels open a turn in the text chat
// formats models are trained on: Anthropic's Human:/Assistant:,
// FastChat's USER:/ASSISTANT:, transcripts' User:/System:/AI:, OpenAI's
// developer role. headingRoles open a turn only after ### (Alpaca's
// sections). The tokenised formats (ChatML, Llama, Gemma, Mistral,
// DeepSeek …) are control tokens, removed by removeSpecialTokens.
var (
	roleNames    = foldedNames("human", "assistant", "user", "system", "developer", "ai")
	headingRoles = foldedNames("instruction", "response", "input")
)

// foldedNames returns names as roleWord reads them.
func foldedNames(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(roleWord(nil, n))
	}
	return out
}

// maxRoleLabel bounds the bytes from a line's start to the end of a role
// label.
const maxRoleLabel = 64

// Full-width forms of the label punctuation.
const (
	fullColon  = "："
	fullOpen   = "［"
	fullClose  = "］"
	fullPrefix = "\xef\xbc" // the first two bytes of each
)

// neutraliseRoleTurns brackets every role-turn label: at the start of a
// line (of the text or after a line break of any kind), after optional
// white space and, for headingRoles, ### marks, a role name (in the folded
// reading: any case, confusables, full-width) followed by a colon, or
// alone in square brackets (optionally followed by a colon). Labels
// elsewhere in a line, other words ("Human resources:", "Users:") and
// quoted lines ("> Human:") are left alone. Only colons and closing
// brackets are looked at, and only the line start before them.
func neutraliseRoleTurns(s string) string {
	var b strings.Builder
	last := 0
	colon, bracket, wide := -1, -1, -1 // the next candidates, once searched
	next := func(pos, i int, find func(string) int) int {
		if pos >= i {
			return pos
		}
		if j := find(s[i:]); j >= 0 {
			return i + j
		}
		return len(s)
	}
	for i := 0; i < len(s); {
		colon = next(colon, i, func(t string) int { return strings.IndexByte(t, ':') })
		bracket = next(bracket, i, func(t string) int { return strings.IndexByte(t, ']') })
		wide = next(wide, i, func(t string) int { return strings.Index(t, fullPrefix) })
		p := min(colon, bracket, wide)
		if p == len(s) {
			break
		}
		i = p + 1
		if p == wide && !strings.HasPrefix(s[p:], fullColon) && !strings.HasPrefix(s[p:], fullClose) {
			continue
		}
		ls := lineStart(s, p, last)
		if ls < 0 {
			continue
		}
		l, ok := roleLabel(s[ls:])
		if !ok || ls+l.at != p {
			continue
		}
		b.WriteString(s[last : ls+l.from])
		b.WriteString(roleOpen)
		b.WriteString(s[ls+l.nameStart : ls+l.nameEnd])
		b.WriteString(roleClose)
		last = ls + l.to
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// lineStart returns the start of the line holding s[p] when only what a
// role label holds stands between: white space, # marks and brackets
// around one word, at most maxRoleLabel bytes, not before floor; else -1.
// It reads backwards from p and gives up at the first character that
// cannot be part of a label, such as a second word.
func lineStart(s string, p, floor int) int {
	const (
		afterName  = iota // white space and a closing bracket before p
		inName            // the word
		beforeName        // an opening bracket, white space, # marks
	)
	phase := afterName
	j := p
	for j > floor {
		r, n := rune(s[j-1]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeLastRuneInString(s[floor:j])
		}
		if r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0x85 || r == 0x2028 || r == 0x2029 {
			break
		}
		if p-(j-n) > maxRoleLabel {
			return -1
		}
		switch {
		case r|0x20 >= 'a' && r|0x20 <= 'z' || r >= utf8.RuneSelf && (unicode.IsLetter(r) || foldValue(r) == foldDrop):
			if phase == beforeName {
				return -1
			}
			phase = inName
		case unicode.IsSpace(r):
			if phase == inName {
				phase = beforeName
			}
		case r == ']' || r == '］':
			if phase != afterName {
				return -1
			}
		case r == '[' || r == '［' || r == '#':
			if phase == afterName {
				return -1
			}
			phase = beforeName
		default:
			return -1
		}
		j -= n
	}
	if phase == afterName || j == floor && floor > 0 {
		return -1
	}
	return j
}

// label is a role-turn label found by roleLabel, as offsets into the line:
// it spans [from, to) (brackets included), the role name [nameStart,
// nameEnd), and at is the colon or, for a bracketed role alone, the
// closing bracket that completes it.
type label struct {
	from, nameStart, nameEnd, to, at int
}

// roleLabel finds a role-turn label at the start of line (the rest of the
// text from a line start).
func roleLabel(line string) (label, bool) {
	var l label
	i := skipLineSpace(line, 0)
	hashes := 0
	for i < len(line) && line[i] == '#' {
		i++
		hashes++
	}
	if hashes > 0 {
		i = skipLineSpace(line, i)
	}
	l.from = i
	bracket := false
	switch {
	case strings.HasPrefix(line[i:], "["):
		bracket, i = true, i+1
	case strings.HasPrefix(line[i:], fullOpen):
		bracket, i = true, i+len(fullOpen)
	}
	l.nameStart = i
	for i < len(line) && i-l.nameStart < maxRoleLabel {
		r, n := utf8.DecodeRuneInString(line[i:])
		if !unicode.IsLetter(r) && foldValue(r) != foldDrop {
			break
		}
		i += n
	}
	l.nameEnd = i
	var buf [maxRoleWord]byte
	word := roleWord(buf[:0], line[l.nameStart:l.nameEnd])
	if !isRole(word, roleNames) && (hashes == 0 || !isRole(word, headingRoles)) {
		return l, false
	}
	l.to = i
	if bracket {
		switch {
		case strings.HasPrefix(line[i:], "]"):
			l.at, i = i, i+1
		case strings.HasPrefix(line[i:], fullClose):
			l.at, i = i, i+len(fullClose)
		default:
			return l, false
		}
		l.to = i
	}
	j := skipLineSpace(line, i)
	switch {
	case strings.HasPrefix(line[j:], ":") || strings.HasPrefix(line[j:], fullColon):
		l.at = j
		return l, true
	case bracket && (j == len(line) || nextLine(line, j) > j):
		return l, true // a bracketed role alone on its line
	}
	return l, false
}

// nextLine returns the index just past the line break at s[i], or i when
// there is none there.
func nextLine(s string, i int) int {
	switch {
	case strings.HasPrefix(s[i:], "\r\n"):
		return i + 2
	case s[i] == '\n' || s[i] == '\r' || s[i] == '\v' || s[i] == '\f':
		return i + 1
	case strings.HasPrefix(s[i:], "\u0085"), strings.HasPrefix(s[i:], "\u2028"), strings.HasPrefix(s[i:], "\u2029"):
		_, n := utf8.DecodeRuneInString(s[i:])
		return i + n
	}
	return i
}

// skipLineSpace skips white space other than line breaks.
func skipLineSpace(s string, i int) int {
	for i < len(s) && nextLine(s, i) == i {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}

// maxRoleWord bounds a role name in folded letters.
const maxRoleWord = 16

// roleWord appends to buf the word w as a role name is read: folded
// (fold.go), with the two case-dependent prototypes (I as l, m as
// rn) read as i and m. It returns nil when w folds to anything but ASCII
// letters, or to more than maxRoleWord of them.
func roleWord(buf []byte, w string) []byte {
	add := func(c byte) bool {
		switch {
		case c < 'a' || c > 'z' || len(buf) == maxRoleWord:
			return false
		case c == 'l':
			c = 'i'
		case c == 'n' && len(buf) > 0 && buf[len(buf)-1] == 'r':
			buf[len(buf)-1] = 'm'
			return true
		}
		buf = append(buf, c)
		return true
	}
	for _, r := range w {
		switch v := foldValue(r); v {
		case foldDrop:
		case foldOther, foldSep:
			return nil
		default:
			fs := foldStrings[v-foldString]
			for j := 0; j < len(fs); j++ {
				if !add(fs[j]) {
					return nil
				}
			}
		}
	}
	return buf
}

// isRole reports whether word (from roleWord) is one of names.
func isRole(word []byte, names []string) bool {
	return slices.Contains(names, string(word))
}
