package caddyhook

import (
	"hash/maphash"
	"slices"
	"strings"
	"unicode/utf8"
)

// redactMin is the shortest piece of a hook token that redaction finds:
// every run of at least redactMin characters of any configured token, in
// the text as written or with its percent and backslash escapes decoded,
// is replaced. A piece this long of a random token is never a chance
// match; a shorter one leaves at least minTokenLength-redactMin+1
// characters unknown.
const redactMin = 12

// redactedText replaces a token, or a piece of one, in recorded text.
const redactedText = "[REDACTED]"

// maxDecodeRounds bounds how many times the escapes of a text are decoded
// (a token percent-encoded twice, %2541, is found).
const maxDecodeRounds = 3

// tokenShapes finds the hook tokens in text: all the configured tokens,
// whole or in pieces of at least redactMin characters, as written,
// percent-encoded (whole or in part, also twice), JSON-escaped, split by
// an encoded slash or with a scheme before them. It keeps no token, only
// keyed hashes of their pieces: the first two bytes of every piece (a bit
// each, so that most positions of a text cost one lookup) and the hash of
// every piece.
type tokenShapes struct {
	seed   maphash.Seed
	pairs  *[1 << 16 / 64]uint64
	pieces map[uint64]struct{}
	lens   []int // the tokens' lengths, shortest first
}

// newTokenShapes indexes the pieces of tokens.
func newTokenShapes(tokens []string) tokenShapes {
	s := tokenShapes{seed: maphash.MakeSeed(), pairs: new([1 << 16 / 64]uint64), pieces: map[uint64]struct{}{}}
	for _, t := range tokens {
		for i := 0; i+redactMin <= len(t); i++ {
			p := pairOf(t, i)
			s.pairs[p/64] |= 1 << (p % 64)
			s.pieces[maphash.String(s.seed, t[i:i+redactMin])] = struct{}{}
		}
		if !slices.Contains(s.lens, len(t)) {
			s.lens = append(s.lens, len(t))
		}
	}
	slices.Sort(s.lens)
	return s
}

// pairOf is the two bytes of v at i as one number.
func pairOf(v string, i int) uint16 { return uint16(v[i])<<8 | uint16(v[i+1]) }

// span is a part [from, to) of a text.
type span struct{ from, to int }

// find returns the parts of v that are pieces of a token (in v's
// offsets, merged), looking at v and at v with its escapes decoded. A
// text shorter than a piece costs nothing.
func (s *tokenShapes) find(v string) []span {
	if len(v) < redactMin || len(s.pieces) == 0 {
		return nil
	}
	var found []span
	view, origin := v, []int32(nil) // origin[i]: where view[i] starts in v; nil: view is v
	pairs := s.pairs
	for round := 0; ; round++ {
		for i := 0; i+redactMin <= len(view); i++ {
			p := uint16(view[i])<<8 | uint16(view[i+1])
			if pairs[p>>6]&(1<<(p&63)) == 0 {
				continue
			}
			if _, ok := s.pieces[maphash.String(s.seed, view[i:i+redactMin])]; !ok {
				continue
			}
			from, to := i, i+redactMin
			if origin != nil {
				from, to = int(origin[from]), int(origin[to])
			}
			if n := len(found); n > 0 && from >= found[n-1].from && from <= found[n-1].to {
				found[n-1].to = max(found[n-1].to, to) // the next piece of the same run
			} else {
				found = append(found, span{from, to})
			}
		}
		if round == maxDecodeRounds {
			break
		}
		next, nextOrigin, ok := unescape(view)
		if !ok || len(next) < redactMin {
			break
		}
		if origin != nil {
			for i, o := range nextOrigin {
				nextOrigin[i] = origin[o]
			}
		}
		view, origin = next, nextOrigin
	}
	return mergeSpans(found)
}

// mergeSpans sorts spans and merges the ones that overlap or touch.
func mergeSpans(sp []span) []span {
	if len(sp) < 2 {
		return sp
	}
	slices.SortFunc(sp, func(a, b span) int { return a.from - b.from })
	out := sp[:1]
	for _, x := range sp[1:] {
		if last := &out[len(out)-1]; x.from <= last.to {
			last.to = max(last.to, x.to)
		} else {
			out = append(out, x)
		}
	}
	return out
}

// unescape decodes v's percent escapes (%41) and backslash escapes (\/,
// \\, \", \uXXXX), as a URL or a JSON string holds them, and returns
// for each byte of the result the offset in v where it starts, with
// len(v) at the end; ok is false when v has no escape.
func unescape(v string) (string, []int32, bool) {
	first := -1
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c == '%' || c == '\\') && escapeAt(v, i) > 1 {
			first = i
			break
		}
	}
	if first < 0 {
		return "", nil, false
	}
	out := make([]byte, first, len(v))
	copy(out, v[:first])
	origin := make([]int32, first, len(v)+1)
	for i := range first {
		origin[i] = int32(i)
	}
	for i := first; i < len(v); {
		c := v[i]
		if c != '%' && c != '\\' {
			out = append(out, c)
			origin = append(origin, int32(i))
			i++
			continue
		}
		switch n := escapeAt(v, i); n {
		case 3:
			out = append(out, unhex(v[i+1])<<4|unhex(v[i+2]))
			origin = append(origin, int32(i))
			i += n
		case 6:
			r := rune(unhex(v[i+2]))<<12 | rune(unhex(v[i+3]))<<8 | rune(unhex(v[i+4]))<<4 | rune(unhex(v[i+5]))
			before := len(out)
			out = utf8.AppendRune(out, r)
			for range len(out) - before {
				origin = append(origin, int32(i))
			}
			i += n
		case 2:
			out = append(out, v[i+1])
			origin = append(origin, int32(i))
			i += n
		default:
			out = append(out, c)
			origin = append(origin, int32(i))
			i++
		}
	}
	origin = append(origin, int32(len(v)))
	return string(out), origin, true
}

// escapeAt is the length of the escape at v[i] (%41: 3, \/: 2, \u0041:
// 6), or 1 when there is none.
func escapeAt(v string, i int) int {
	switch {
	case v[i] == '%' && i+2 < len(v) && ishex(v[i+1]) && ishex(v[i+2]):
		return 3
	case v[i] != '\\' || i+1 >= len(v):
		return 1
	case v[i+1] == '/' || v[i+1] == '\\' || v[i+1] == '"':
		return 2
	case v[i+1] == 'u' && i+5 < len(v) && allHex(v[i+2:i+6]):
		return 6
	}
	return 1
}

// escapeViews are s and s with its escapes decoded, once, twice, … up to
// maxDecodeRounds times, as long as decoding changes it.
func escapeViews(s string) []string {
	views := []string{s}
	for v := s; len(views) <= maxDecodeRounds; {
		next, _, ok := unescape(v)
		if !ok {
			break
		}
		views, v = append(views, next), next
	}
	return views
}

// ishex reports a hexadecimal digit.
func ishex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// allHex reports a run of hexadecimal digits.
func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !ishex(s[i]) {
			return false
		}
	}
	return true
}

// unhex is the value of a hexadecimal digit.
func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// redact returns s with every piece of a token replaced by [REDACTED];
// s itself when it holds none. Cut a text after redacting it, never
// before: a cut could leave a piece shorter than redactMin of a token the
// whole text shows.
func (s *tokenShapes) redact(v string) string {
	found := s.find(v)
	if len(found) == 0 {
		return v
	}
	var b strings.Builder
	b.Grow(len(v))
	last := 0
	for _, sp := range found {
		b.WriteString(v[last:sp.from])
		b.WriteString(redactedText)
		last = sp.to
	}
	b.WriteString(v[last:])
	return b.String()
}

// holdsWhole reports whether v holds a whole token, as written or with
// its escapes decoded, anywhere: a run of pieces at least as long as a
// token in which isToken finds one.
func (s *tokenShapes) holdsWhole(v string, isToken func(string) bool) bool {
	for _, sp := range s.find(v) {
		if sp.to-sp.from < s.lens[0] {
			continue
		}
		for _, view := range escapeViews(v[sp.from:sp.to]) {
			for _, n := range s.lens {
				for i := 0; i+n <= len(view); i++ {
					if isToken(view[i : i+n]) {
						return true
					}
				}
			}
		}
	}
	return false
}

// cutText cuts s at max bytes (0: none), never inside a UTF-8 sequence.
func cutText(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
