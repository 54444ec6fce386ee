package verify

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
)

// TestEveryProviderSurvivesAnyRequest sends degenerate requests to every
// provider's first vector config: nothing panics, every failure is one of
// the package's error types, and Offered never indexes an empty list.
func TestEveryProviderSurvivesAnyRequest(t *testing.T) {
	reqs := map[string]*Request{
		"zero":           {},
		"nil header":     {Method: "POST", Body: []byte("{}")},
		"GET no query":   {Method: "GET", URL: &url.URL{Path: "/"}, Header: http.Header{}},
		"HEAD":           {Method: "HEAD", Header: http.Header{}},
		"not JSON":       {Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte("\x00\xff{")},
		"bad form":       {Method: "POST", Header: http.Header{"Content-Type": {formCT}}, Body: []byte("a=%zz&&=")},
		"array":          {Method: "POST", Header: http.Header{}, Body: []byte(`[1,2,{"type":1}]`)},
		"deep":           {Method: "POST", Header: http.Header{}, Body: []byte(deepJSON(5000))},
		"handshake-ish":  {Method: "GET", URL: &url.URL{Path: "/", RawQuery: "hub.mode=subscribe&crc_token=%7B&challenge=&validationToken=x"}, Header: http.Header{}},
		"garbage sigs":   {Method: "POST", Header: garbageHeaders(), Body: []byte(`{"type":"url_verification","challenge":"x","event":"endpoint.url_validation"}`)},
		"huge challenge": {Method: "GET", URL: &url.URL{Path: "/", RawQuery: "challenge=" + string(make([]byte, 4000))}, Header: http.Header{}},
	}
	for _, p := range all() {
		pt := providerTestsByName[p.Name]
		if pt == nil {
			continue
		}
		env := Env{}
		if pt.env != nil {
			env = pt.env(t)
		}
		v, err := NewWithEnv(pt.vectors[0].cfg, env)
		if err != nil {
			t.Fatal(err)
		}
		_ = v.Offered(nil)
		_ = v.Offered(http.Header{})
		for name, r := range reqs {
			for _, call := range []func() error{
				func() error { _, err := v.VerifyRequest(clone(r), testNow); return err },
				func() error { _, err := v.Handshake(clone(r), testNow); return err },
			} {
				err := call()
				var (
					ve *Error
					pe *PayloadError
					ue *UnavailableError
				)
				if err != nil && !errors.As(err, &ve) && !errors.As(err, &pe) && !errors.As(err, &ue) {
					t.Errorf("%s / %s: error of type %T: %v", p.Name, name, err, err)
				}
			}
		}
	}
}

// clone copies a request (the verifier may set its Header).
func clone(r *Request) *Request {
	c := *r
	if r.Header != nil {
		c.Header = r.Header.Clone()
	}
	return &c
}

// deepJSON nests n arrays.
func deepJSON(n int) string {
	b := make([]byte, 0, 2*n)
	for range n {
		b = append(b, '[')
	}
	for range n {
		b = append(b, ']')
	}
	return string(b)
}

// garbageHeaders sets every provider's credentials headers to junk.
func garbageHeaders() http.Header {
	h := http.Header{}
	for _, p := range all() {
		for _, n := range p.SignatureHeaders {
			h.Set(n, "v1=zz,t=x;h1=,sha256=%%%")
		}
	}
	h.Set("Authorization", "Bearer a.b.c")
	h.Set("X-Signature-Timestamp", "1700000000")
	return h
}
