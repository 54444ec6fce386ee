package caddyhook

import "unicode/utf8"

//go:generate go run gen_foldtable.go

// Fold values of the generated table (wrap_foldtable.go): how a character
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

// wordScanner finds a word in the folded form of a text as it is
// streamed, without allocating (Knuth–Morris–Pratt over folded bytes).
type wordScanner struct {
	word string
	fail []int
	// idle marks the bytes that cannot start the word or touch the
	// scanner's state, which it skips while nothing is matched.
	idle [256]bool
}

// newWordScanner prepares a scanner for word (lower-case ASCII letters).
func newWordScanner(word string) *wordScanner {
	w := &wordScanner{word: word, fail: make([]int, len(word))}
	for i, k := 1, 0; i < len(word); i++ {
		for k > 0 && word[i] != word[k] {
			k = w.fail[k-1]
		}
		if word[i] == word[k] {
			k++
		}
		w.fail[i] = k
	}
	for c := range utf8.RuneSelf {
		switch fc := asciiFold[c]; fc {
		case asciiDrop, asciiMulti:
		default:
			w.idle[c] = fc != word[0]
		}
	}
	return w
}

// step feeds one folded byte; it reports a complete match.
func (w *wordScanner) step(k *int, c byte) bool {
	for *k > 0 && w.word[*k] != c {
		*k = w.fail[*k-1]
	}
	if w.word[*k] == c {
		*k++
	}
	return *k == len(w.word)
}

// in reports whether the folded form of s contains the word.
func (w *wordScanner) in(s string) bool {
	k := 0
	for i := 0; i < len(s); {
		if k == 0 {
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
				if w.feed(&k, foldValue(rune(c))) {
					return true
				}
			default:
				if w.step(&k, fc) {
					return true
				}
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if w.feed(&k, foldValue(r)) {
			return true
		}
	}
	return false
}

// feed steps through the folded form of one rune's fold value.
func (w *wordScanner) feed(k *int, v uint16) bool {
	switch v {
	case foldDrop:
	case foldOther, foldSep:
		*k = 0
	default:
		fs := foldStrings[v-foldString]
		for j := 0; j < len(fs); j++ {
			if w.step(k, fs[j]) {
				return true
			}
		}
	}
	return false
}
