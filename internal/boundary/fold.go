package boundary

import "unicode/utf8"

//go:generate go run gen_foldtable.go

// Fold values of the generated table (foldtable.go): how a character
// reads when a model, or a person, looks for a boundary marker.
const (
	foldOther  = 0 // a letter or digit that reads as nothing ASCII: part of some other word
	foldSep    = 1 // a separator: white space, punctuation, symbols, emoji
	foldDrop   = 2 // invisible: default-ignorable, format and control characters, combining marks
	foldString = 3 // from here on: the ASCII text foldStrings[v-foldString]
)

// foldValue returns r's fold value: NFKD, invisible characters dropped,
// confusables mapped to their UTS #39 prototypes, lower-cased.
func foldValue(r rune) uint16 {
	if r < 0 || r > utf8.MaxRune {
		return foldSep
	}
	return foldStage2[int(foldStage1[r>>foldBlockBits])<<foldBlockBits|int(r&(1<<foldBlockBits-1))]
}

// foldedChar is one character of folded text: an ASCII byte (0 for a
// letter that reads as nothing ASCII, ' ' for a separator) and the byte
// offset of the source rune it comes from.
type foldedChar struct {
	c   byte
	off uint32
}

// foldText folds s (at most 4 GiB); a source rune folding to several
// characters (ﬀ, ⒠, m → "rn") yields each with the rune's offset.
func foldText(s string) []foldedChar {
	f := make([]foldedChar, 0, len(s)+len(s)/8)
	for off := 0; off < len(s); {
		if c := asciiFold[s[off]&0x7F]; s[off] < utf8.RuneSelf && c != asciiMulti {
			if c != asciiDrop {
				f = append(f, foldedChar{c, uint32(off)})
			}
			off++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[off:])
		switch v := foldValue(r); v {
		case foldDrop:
		case foldOther:
			f = append(f, foldedChar{0, uint32(off)})
		case foldSep:
			f = append(f, foldedChar{' ', uint32(off)})
		default:
			fs := foldStrings[v-foldString]
			for j := 0; j < len(fs); j++ {
				f = append(f, foldedChar{fs[j], uint32(off)})
			}
		}
		off += n
	}
	return f
}

// runeEnd returns the offset just past the rune of s that starts at off.
func runeEnd(s string, off uint32) int {
	_, n := utf8.DecodeRuneInString(s[off:])
	return int(off) + n
}

// isWordChar reports a folded character that belongs to a word.
func isWordChar(c byte) bool {
	return c == 0 || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// ASCII bytes as the word scanner reads them: the folded byte, or one of
// these for a byte that folds to nothing or to several characters.
const (
	asciiDrop  = 0xFE
	asciiMulti = 0xFF
)

// asciiFold is foldValue for ASCII, as single bytes.
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for c := range t {
		switch v := foldValue(rune(c)); {
		case v == foldDrop:
			t[c] = asciiDrop
		case v == foldSep:
			t[c] = ' '
		case v >= foldString && len(foldStrings[v-foldString]) == 1:
			t[c] = foldStrings[v-foldString][0]
		default:
			t[c] = asciiMulti
		}
	}
	return t
}()

// leetLetter is the letter a folded byte stands for in leetspeak (3 for
// e, 4 and @ for a, 5 and $ for s, 7 and + for t, | for l; 0 and 1
// already fold to o and l), or 0.
func leetLetter(c byte) byte {
	switch c {
	case '3':
		return 'e'
	case '4', '@':
		return 'a'
	case '5', '$':
		return 's'
	case '7', '+':
		return 't'
	case '|':
		return 'l'
	}
	return 0
}

// spacedWord matches a word in folded text the way a reader finds it:
// its letters in order, each possibly in leetspeak, with any separators
// (white space, punctuation, symbols, line breaks) between them or none.
// It is a shift-and automaton: bit k of a state says that the first k+1
// letters have been read. A leetspeak symbol (@ $ + |) is both a letter
// and a separator.
type spacedWord struct {
	word  string
	last  uint32      // the bit of a complete match
	masks [256]uint32 // bit k: the folded byte reads as word[k]
	// idle marks the raw ASCII bytes that leave an empty state empty,
	// which the streaming scan skips.
	idle [256]bool
}

// newSpacedWord prepares a matcher for word (at most 32 lower-case ASCII
// letters).
func newSpacedWord(word string) *spacedWord {
	w := &spacedWord{word: word, last: 1 << (len(word) - 1)}
	for c := range 256 {
		for k := 0; k < len(word); k++ {
			if byte(c) == word[k] || leetLetter(byte(c)) == word[k] {
				w.masks[c] |= 1 << k
			}
		}
	}
	for c := range utf8.RuneSelf {
		switch fc := asciiFold[c]; fc {
		case asciiDrop, asciiMulti:
		default:
			w.idle[c] = w.masks[fc]&1 == 0
		}
	}
	return w
}

// step advances state d over folded byte c, a new match possibly starting
// at c.
func (w *spacedWord) step(d uint32, c byte) uint32 {
	return w.stepFrom(d<<1|1, d, c)
}

// stepAnchored advances state d over folded byte c without starting a new
// match.
func (w *spacedWord) stepAnchored(d uint32, c byte) uint32 {
	return w.stepFrom(d<<1, d, c)
}

// stepFrom is step with the shifted state given: letters advance,
// separators keep the state, anything else clears it.
func (w *spacedWord) stepFrom(shifted, d uint32, c byte) uint32 {
	next := shifted & w.masks[c]
	if !isWordChar(c) {
		next |= d
	}
	return next
}

// matchAt matches the word at f[i:] (starting with its first letter) and
// returns the index just past its last letter.
func (w *spacedWord) matchAt(f []foldedChar, i int) (int, bool) {
	d := w.masks[f[i].c] & 1
	for j := i + 1; d != 0; j++ {
		if d&w.last != 0 {
			return j, true
		}
		if j == len(f) {
			break
		}
		d = w.stepAnchored(d, f[j].c)
	}
	return 0, false
}

// in reports whether the folded form of s contains the word.
func (w *spacedWord) in(s string) bool {
	var d uint32
	for i := 0; i < len(s); {
		if d == 0 {
			for i < len(s) && w.idle[s[i]] {
				i++
			}
			if i == len(s) {
				break
			}
		}
		if c := s[i]; c < utf8.RuneSelf {
			i++
			switch fc := asciiFold[c]; fc {
			case asciiDrop:
			case asciiMulti:
				if d = w.feed(d, foldValue(rune(c))); d&w.last != 0 {
					return true
				}
			default:
				if d = w.step(d, fc); d&w.last != 0 {
					return true
				}
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if d = w.feed(d, foldValue(r)); d&w.last != 0 {
			return true
		}
	}
	return false
}

// feed steps through the folded form of one rune's fold value.
func (w *spacedWord) feed(d uint32, v uint16) uint32 {
	switch v {
	case foldDrop:
	case foldOther:
		return 0
	case foldSep:
		return w.step(d, ' ')
	default:
		fs := foldStrings[v-foldString]
		for j := 0; j < len(fs); j++ {
			if d = w.step(d, fs[j]); d&w.last != 0 {
				return d
			}
		}
	}
	return d
}
