package verify

import (
	"net/http"
	"net/url"
	"testing"
)

// TestPublicURL reconstructs the URL senders signed.
func TestPublicURL(t *testing.T) {
	u := &url.URL{Path: "/hooks/sms", RawPath: "/hooks/sms", RawQuery: "foo=1&bar=%2F"}
	for _, tc := range []struct {
		name   string
		r      Request
		public string
		want   string
	}{
		{"TLS", Request{URL: u, Host: "hooks.example.com", TLS: true}, "", "https://hooks.example.com/hooks/sms?foo=1&bar=%2F"},
		{"plain", Request{URL: u, Host: "hooks.example.com:8080"}, "", "http://hooks.example.com:8080/hooks/sms?foo=1&bar=%2F"},
		{"trusted proxy", Request{URL: u, Host: "10.0.0.2", TrustedProxy: true, Header: http.Header{
			"X-Forwarded-Proto": {"http, HTTPS"}, "X-Forwarded-Host": {"evil.example, hooks.example.com"}}}, "", "https://hooks.example.com/hooks/sms?foo=1&bar=%2F"},
		{"untrusted proxy headers ignored", Request{URL: u, Host: "10.0.0.2", Header: http.Header{
			"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"evil.example"}}}, "", "http://10.0.0.2/hooks/sms?foo=1&bar=%2F"},
		{"trusted proxy, odd scheme", Request{URL: u, Host: "h", TrustedProxy: true, Header: http.Header{"X-Forwarded-Proto": {"gopher"}}}, "", "http://h/hooks/sms?foo=1&bar=%2F"},
		{"public_url", Request{URL: u, Host: "10.0.0.2"}, "https://hooks.example.com/edge", "https://hooks.example.com/edge/hooks/sms?foo=1&bar=%2F"},
		{"no URL", Request{Host: "h", TLS: true}, "", "https://h/"},
		{"escaped path kept", Request{URL: &url.URL{Path: "/a b", RawPath: "/a%20b"}, Host: "h", TLS: true}, "", "https://h/a%20b"},
	} {
		if got := PublicURL(&tc.r, tc.public); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	for in, want := range map[string]string{"https://h.example/": "https://h.example", "http://h:8080/p/": "http://h:8080/p", "": ""} {
		if got, err := checkPublicURL(in); err != nil || got != want {
			t.Errorf("checkPublicURL(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"h.example", "https://", "https://u:p@h", "https://h/#f", "mailto:x@y"} {
		if _, err := checkPublicURL(bad); err == nil {
			t.Errorf("checkPublicURL(%q) accepted", bad)
		}
	}
}
