package verify

import (
	"crypto/sha512"
	"encoding/base64"
)

// encoding is how a signature is written in a header.
type encoding int

// Supported signature encodings.
const (
	encHex    encoding = iota // hexadecimal, either case
	encBase64                 // standard alphabet with padding
)

// strictBase64 rejects non-canonical padding bits, so one MAC has one
// accepted spelling.
var strictBase64 = base64.StdEncoding.Strict()

// maxEncodedLen is the longest encoded signature: a SHA-512 MAC in base64.
const maxEncodedLen = (sha512.Size + 2) / 3 * 4

// candidates holds the decoded signatures taken from one request, in a
// fixed array so parsing allocates nothing.
type candidates struct {
	n   int
	sig [MaxSignatures][sha512.Size]byte
}

// add decodes text as one signature of exactly size bytes. It returns a
// Reason on failure: ReasonTooManySignatures when the set is full,
// ReasonMalformedSignature for a wrong encoding or length.
func (c *candidates) add(enc encoding, size int, text string) string {
	if c.n == MaxSignatures {
		return ReasonTooManySignatures
	}
	dst := c.sig[c.n][:size]
	var ok bool
	switch enc {
	case encHex:
		ok = decodeHex(dst, text)
	case encBase64:
		ok = decodeBase64(dst, text)
	}
	if !ok {
		return ReasonMalformedSignature
	}
	c.n++
	return ""
}

// decodeHex decodes text into dst, which it must fill exactly.
func decodeHex(dst []byte, text string) bool {
	if len(text) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := unhex(text[2*i])
		lo, ok2 := unhex(text[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// unhex decodes one hexadecimal digit.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// decodeBase64 decodes padded standard base64 text into dst, which it must
// fill exactly.
func decodeBase64(dst []byte, text string) bool {
	if len(text) != base64.StdEncoding.EncodedLen(len(dst)) {
		return false
	}
	var src [maxEncodedLen]byte
	copy(src[:], text)
	var out [maxEncodedLen]byte
	n, err := strictBase64.Decode(out[:], src[:len(text)])
	if err != nil || n != len(dst) {
		return false
	}
	copy(dst, out[:n])
	return true
}
