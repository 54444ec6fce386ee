package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestReadResponse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    response
		wantErr error // nil: success; errMalformed or io.ErrUnexpectedEOF otherwise
	}{
		{name: "content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
			want: response{status: 200, bodyLen: 5}},
		{name: "no reason phrase", in: "HTTP/1.1 401\r\nContent-Length: 0\r\n\r\n",
			want: response{status: 401}},
		{name: "bare LF line ends", in: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
			want: response{status: 200, bodyLen: 2}},
		{name: "header case and blanks", in: "HTTP/1.1 429 Too Many Requests\r\ncontent-length:\t3 \r\nRetry-After: 7\r\n\r\nabc",
			want: response{status: 429, bodyLen: 3}},
		{name: "chunked with extension and trailer", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n",
			want: response{status: 200, bodyLen: 15}},
		{name: "chunked wins over length", in: "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
			want: response{status: 200, bodyLen: 2}},
		{name: "connection close", in: "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
			want: response{status: 413, close: true}},
		{name: "close in a token list", in: "HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\nContent-Length: 0\r\n\r\n",
			want: response{status: 200, close: true}},
		{name: "http/1.0 closes", in: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
			want: response{status: 200, bodyLen: 1, close: true}},
		{name: "http/1.0 keep-alive", in: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx",
			want: response{status: 200, bodyLen: 1}},
		{name: "unframed body runs to EOF", in: "HTTP/1.1 200 OK\r\n\r\nuntil the end",
			want: response{status: 200, bodyLen: 13, close: true}},
		{name: "204 has no body", in: "HTTP/1.1 204 No Content\r\n\r\n",
			want: response{status: 204}},
		{name: "identical duplicate lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
			want: response{status: 200, bodyLen: 1}},

		{name: "empty input", in: "", wantErr: io.EOF},
		{name: "http/2 status line", in: "HTTP/2 200 OK\r\n\r\n", wantErr: errMalformed},
		{name: "http/1.2", in: "HTTP/1.2 200 OK\r\n\r\n", wantErr: errMalformed},
		{name: "letters in status", in: "HTTP/1.1 2x0 OK\r\n\r\n", wantErr: errMalformed},
		{name: "status below 100", in: "HTTP/1.1 099 Low\r\n\r\n", wantErr: errMalformed},
		{name: "no space after code", in: "HTTP/1.1 200OK\r\n\r\n", wantErr: errMalformed},
		{name: "header without colon", in: "HTTP/1.1 200 OK\r\nBroken\r\n\r\n", wantErr: errMalformed},
		{name: "space in header name", in: "HTTP/1.1 200 OK\r\nContent Length: 1\r\n\r\nx", wantErr: errMalformed},
		{name: "signed length", in: "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx", wantErr: errMalformed},
		{name: "conflicting lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", wantErr: errMalformed},
		{name: "huge length", in: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", wantErr: errMalformed},
		{name: "gzip transfer encoding", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", wantErr: errMalformed},
		{name: "bad chunk size", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", wantErr: errMalformed},
		{name: "chunk without CRLF", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n0\r\n\r\n", wantErr: errMalformed},
		{name: "204 with a body", in: "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc", wantErr: errMalformed},
		{name: "truncated body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", wantErr: io.ErrUnexpectedEOF},
		{name: "truncated headers", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n", wantErr: io.ErrUnexpectedEOF},
		{name: "truncated status line", in: "HTTP/1.1 200 OK", wantErr: io.ErrUnexpectedEOF},
		{name: "truncated chunk", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc", wantErr: io.ErrUnexpectedEOF},
		{name: "too many headers", in: "HTTP/1.1 200 OK\r\n" + strings.Repeat("X: y\r\n", maxHeaderLines+1) + "\r\n", wantErr: errMalformed},
		{name: "line longer than the buffer", in: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("y", 5000) + "\r\n\r\n", wantErr: errMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readResponse(bufio.NewReaderSize(strings.NewReader(tt.in), 4096))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestReadResponseSequence reads several keep-alive answers off one
// stream, each ending exactly where the next begins.
func TestReadResponseSequence(t *testing.T) {
	stream := "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc" +
		"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nnope\r\n0\r\n\r\n" +
		"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n"
	br := bufio.NewReader(strings.NewReader(stream))
	for _, want := range []response{{status: 200, bodyLen: 3}, {status: 401, bodyLen: 4}, {status: 429}} {
		got, err := readResponse(br)
		if err != nil || got != want {
			t.Fatalf("got %+v, %v; want %+v", got, err, want)
		}
	}
	if _, err := readResponse(br); err != io.EOF {
		t.Fatalf("after the last answer: err = %v, want io.EOF", err)
	}
}

// TestReadResponseMatchesNetHTTP checks real server output, as net/http
// writes it, against net/http's own reader.
func TestReadResponseMatchesNetHTTP(t *testing.T) {
	for _, body := range []string{"", "x", strings.Repeat("body", 3000)} {
		for _, chunked := range []bool{false, true} {
			resp := &http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
				Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
			if chunked {
				resp.ContentLength, resp.TransferEncoding = -1, []string{"chunked"}
			}
			var buf bytes.Buffer
			if err := resp.Write(&buf); err != nil {
				t.Fatal(err)
			}
			got, err := readResponse(bufio.NewReader(&buf))
			if err != nil || got.status != 200 || got.bodyLen != int64(len(body)) || buf.Len() != 0 {
				t.Fatalf("body %d bytes, chunked %v: got %+v, %v, %d bytes left", len(body), chunked, got, err, buf.Len())
			}
		}
	}
}

// FuzzReadResponse checks that the parser never panics or over-reads,
// and that whenever both it and net/http accept an answer they agree on
// the status and the body length.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: 1\r\n\r\n",
		"HTTP/1.0 404 Not Found\r\n\r\nrest",
		"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 9\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		got, err := readResponse(bufio.NewReaderSize(r, 4096))
		if err != nil {
			return
		}
		if got.status < 100 || got.status > 999 || got.bodyLen < 0 || got.bodyLen > int64(len(data)) {
			t.Fatalf("implausible answer %+v from %d bytes", got, len(data))
		}
		ref, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
		if err != nil {
			return // net/http is stricter in places; only agreement is checked
		}
		n, err := io.Copy(io.Discard, ref.Body)
		if err != nil {
			return
		}
		if ref.StatusCode != got.status || n != got.bodyLen {
			t.Fatalf("net/http: status %d, body %d; readResponse: %+v", ref.StatusCode, n, got)
		}
	})
}
