package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Bounds that keep a broken or hostile server from stalling the generator.
const (
	maxHeaderLines = 100
	maxBodyBytes   = 64 << 20
)

// response is what the load generator keeps of one HTTP/1.1 answer.
type response struct {
	status  int
	bodyLen int64
	close   bool // the server closes the connection after this answer
}

// errMalformed wraps every parse failure of readResponse.
var errMalformed = errors.New("malformed response")

// malformed returns a parse error wrapping errMalformed.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// readResponse reads one response from br and discards its body. It is a
// minimal HTTP/1.1 client parser: status line, the three framing headers
// (Content-Length, Transfer-Encoding, Connection) and the body framing,
// with nothing allocated on the common path.
func readResponse(br *bufio.Reader) (response, error) {
	line, err := readLine(br)
	if err != nil {
		return response{}, err
	}
	var resp response
	var http10 bool
	if resp.status, http10, err = parseStatusLine(line); err != nil {
		return response{}, err
	}
	f, err := readFraming(br)
	if err != nil {
		return response{}, err
	}
	resp.close = f.close || http10 && !f.keepAlive
	if http10 {
		f.chunked = false // HTTP/1.0 has no chunked coding; net/http ignores the header too
	}
	switch {
	case resp.status < 200 || resp.status == 204 || resp.status == 304:
		if f.chunked || f.length > 0 {
			return response{}, malformed("status %d with a body", resp.status)
		}
	case f.chunked:
		resp.bodyLen, err = discardChunked(br)
	case f.length >= 0:
		resp.bodyLen = f.length
		if _, err = br.Discard(int(f.length)); err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
	default: // no framing: the body runs to the end of the connection
		resp.close = true
		resp.bodyLen, err = discardToEOF(br)
	}
	if err != nil {
		return response{}, err
	}
	return resp, nil
}

// readLine returns one line without its CRLF (or LF). The slice is only
// valid until the next read.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return nil, malformed("line longer than %d bytes", br.Size())
	case err == io.EOF && len(line) > 0:
		return nil, io.ErrUnexpectedEOF
	case err != nil:
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// parseStatusLine parses "HTTP/1.x NNN[ reason]".
func parseStatusLine(line []byte) (status int, http10 bool, err error) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		len(line) > 12 && line[12] != ' ' {
		return 0, false, malformed("bad status line")
	}
	switch line[7] {
	case '0':
		http10 = true
	case '1':
	default:
		return 0, false, malformed("unsupported protocol version")
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, false, malformed("bad status code")
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 {
		return 0, false, malformed("bad status code")
	}
	return status, http10, nil
}

// framing is what the headers say about the body and the connection.
type framing struct {
	length    int64 // -1: not given
	chunked   bool
	close     bool
	keepAlive bool
}

// readFraming reads the header block up to the empty line.
func readFraming(br *bufio.Reader) (framing, error) {
	f := framing{length: -1}
	for n := 0; ; n++ {
		if n > maxHeaderLines {
			return f, malformed("more than %d header lines", maxHeaderLines)
		}
		line, err := readLine(br)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return f, err
		}
		if len(line) == 0 {
			return f, nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !isToken(line[:colon]) {
			return f, malformed("bad header line")
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			v, ok := parseLength(value)
			if !ok || f.length >= 0 && f.length != v {
				return f, malformed("bad Content-Length")
			}
			f.length = v
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("chunked")) || f.chunked {
				return f, malformed("unsupported Transfer-Encoding")
			}
			f.chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			f.close = f.close || hasToken(value, "close")
			f.keepAlive = f.keepAlive || hasToken(value, "keep-alive")
		}
	}
}

// isToken reports whether b is a non-empty RFC 9110 token (a header name).
func isToken(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return len(b) > 0
}

// parseLength parses a decimal Content-Length within maxBodyBytes.
func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n = n*10 + int64(c-'0'); n > maxBodyBytes {
			return 0, false
		}
	}
	return n, true
}

// hasToken reports whether the comma-separated list v contains tok,
// ignoring case and surrounding blanks.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var item []byte
		item, v, _ = bytes.Cut(v, []byte(","))
		if bytes.EqualFold(bytes.Trim(item, " \t"), []byte(tok)) {
			return true
		}
	}
	return false
}

// discardChunked skips a chunked body and its trailers and returns the
// decoded length.
func discardChunked(br *bufio.Reader) (int64, error) {
	var total int64
	for {
		line, err := readLine(br)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return 0, err
		}
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, ok := parseHex(bytes.TrimRight(size, " \t"))
		if !ok {
			return 0, malformed("bad chunk size")
		}
		if total += n; total > maxBodyBytes {
			return 0, malformed("body larger than %d bytes", maxBodyBytes)
		}
		if n == 0 {
			break
		}
		if _, err := br.Discard(int(n)); err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		if line, err := readLine(br); err != nil || len(line) != 0 {
			return 0, malformed("chunk not followed by CRLF")
		}
	}
	for { // trailers up to the empty line
		line, err := readLine(br)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return 0, err
		}
		if len(line) == 0 {
			return total, nil
		}
	}
}

// parseHex parses a chunk size (at most 15 hex digits).
func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		n = n<<4 | int64(c)
	}
	return n, true
}

// discardToEOF skips an unframed body.
func discardToEOF(br *bufio.Reader) (int64, error) {
	n, err := io.Copy(io.Discard, io.LimitReader(br, maxBodyBytes+1))
	if err == nil && n > maxBodyBytes {
		return 0, malformed("body larger than %d bytes", maxBodyBytes)
	}
	return n, err
}
