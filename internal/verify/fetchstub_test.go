package verify

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// stubTransport answers requests from a map of URL → body (404 when
// absent) and counts them; nothing leaves the process.
type stubTransport struct {
	mu    sync.Mutex
	pages map[string]string
	hits  map[string]int
	total atomic.Int64
}

// newStub returns a client served by pages.
func newStub(pages map[string]string) (*http.Client, *stubTransport) {
	st := &stubTransport{pages: pages, hits: map[string]int{}}
	return &http.Client{Transport: st, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, st
}

// RoundTrip implements http.RoundTripper.
func (st *stubTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	st.total.Add(1)
	st.mu.Lock()
	body, ok := st.pages[r.URL.String()]
	st.hits[r.URL.String()]++
	st.mu.Unlock()
	code := http.StatusOK
	if !ok {
		code, body = http.StatusNotFound, "not found"
	}
	return &http.Response{StatusCode: code, Body: io.NopCloser(bytes.NewReader([]byte(body))), Header: http.Header{}, Request: r}, nil
}

// hitsOf returns how often url was fetched.
func (st *stubTransport) hitsOf(url string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.hits[url]
}

// testRSA returns a 2048-bit key generated once per process (slow).
var testRSA = sync.OnceValues(func() (*rsa.PrivateKey, *rsa.PrivateKey) {
	a, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	b, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return a, b
})
