package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyhook/caddyhook/internal/jsonenc"
)

// Request is one HTTP request as a Verifier sees it. The caller fills it
// from the original request (before any rewrite of its URL) and the raw
// body it has read.
type Request struct {
	// Context bounds what the verification may fetch (nil: Background).
	Context context.Context
	// Method is the HTTP method ("" means POST).
	Method string
	// URL is the request target as received: its escaped path and raw
	// query are what providers that sign the URL signed (nil means "/").
	URL *url.URL
	// Host is the Host header.
	Host string
	// TLS reports whether the request arrived over TLS.
	TLS bool
	// TrustedProxy reports whether the request came from a trusted proxy,
	// whose X-Forwarded-Proto and X-Forwarded-Host then describe the
	// public URL.
	TrustedProxy bool
	// Header is the request header.
	Header http.Header
	// Body is the raw request body.
	Body []byte
}

// method returns r's method, POST when unset.
func (r *Request) method() string {
	if r.Method == "" {
		return http.MethodPost
	}
	return r.Method
}

// ctx returns r's context.
func (r *Request) ctx() context.Context {
	if r.Context == nil {
		return context.Background()
	}
	return r.Context
}

// query returns r's parsed query (empty when it has none or it does not
// parse).
func (r *Request) query() url.Values {
	if r.URL == nil || r.URL.RawQuery == "" {
		return url.Values{}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return url.Values{}
	}
	return q
}

// isForm reports whether r's Content-Type is application/x-www-form-urlencoded.
func (r *Request) isForm() bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// PublicURL returns the URL the sender called, as the providers that sign
// URLs (Twilio, Square, HubSpot, Trello, Mandrill) signed it. With
// publicURL set (a validated public_url: scheme, host and an optional path
// prefix, see [Config.PublicURL]) it is publicURL followed by the
// request's escaped path and raw query. Otherwise the scheme is https over
// TLS, else the last X-Forwarded-Proto value when the request came from a
// trusted proxy (http or https only), else http; the host is the last
// X-Forwarded-Host value from a trusted proxy, else the Host header; then
// the escaped path and the raw query, exactly as received. This is the one
// place the public URL is reconstructed.
func PublicURL(r *Request, publicURL string) string {
	path, rawQuery := "/", ""
	if r.URL != nil {
		if p := r.URL.EscapedPath(); p != "" {
			path = p
		}
		rawQuery = r.URL.RawQuery
	}
	var b strings.Builder
	if publicURL != "" {
		b.WriteString(publicURL)
	} else {
		scheme := "http"
		if r.TLS {
			scheme = "https"
		} else if r.TrustedProxy {
			if p := lastListValue(r.Header.Values("X-Forwarded-Proto")); p == "http" || p == "https" {
				scheme = p
			}
		}
		host := r.Host
		if r.TrustedProxy {
			if h := lastListValue(r.Header.Values("X-Forwarded-Host")); h != "" {
				host = h
			}
		}
		b.WriteString(scheme)
		b.WriteString("://")
		b.WriteString(host)
	}
	b.WriteString(path)
	if rawQuery != "" {
		b.WriteByte('?')
		b.WriteString(rawQuery)
	}
	return b.String()
}

// lastListValue returns the last element of a comma-separated header
// field, trimmed and lower-cased for the scheme comparison's sake only
// when it is a scheme ("" when absent). The last element is the one the
// nearest (trusted) proxy wrote.
func lastListValue(vals []string) string {
	if len(vals) == 0 {
		return ""
	}
	v := vals[len(vals)-1]
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	v = trimOWS(v)
	if l := strings.ToLower(v); l == "http" || l == "https" {
		return l
	}
	return v
}

// checkPublicURL validates a configured public_url and returns it without
// a trailing slash.
func checkPublicURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("public_url: %q does not parse", s)
	case u.Scheme != "https" && u.Scheme != "http":
		return "", fmt.Errorf("public_url: %q: the scheme must be https or http", s)
	case u.Host == "":
		return "", fmt.Errorf("public_url: %q has no host", s)
	case u.User != nil, u.RawQuery != "", u.Fragment != "", u.ForceQuery:
		return "", fmt.Errorf("public_url: %q: only scheme, host and an optional path prefix (the request's path and query follow)", s)
	}
	return strings.TrimSuffix(s, "/"), nil
}

// call is one verification in progress: the request plus what is derived
// from it at most once.
type call struct {
	v   *Verifier
	r   *Request
	now time.Time
	req Request // r's storage for Verify

	formDone bool
	form     *Form
	formErr  error

	payloadDone bool
	payload     []byte // the JSON the mapping sees; nil until set
	replaced    bool   // payload is not the raw body
}

// body returns the raw body.
func (c *call) body() []byte { return c.r.Body }

// header returns the request header (never nil).
func (c *call) header() http.Header {
	if c.r.Header == nil {
		c.r.Header = http.Header{}
	}
	return c.r.Header
}

// parsedForm returns the request's form body; an error is a *FormError.
func (c *call) parsedForm() (*Form, error) {
	if !c.formDone {
		c.formDone = true
		c.form, c.formErr = ParseForm(c.r.Body)
	}
	return c.form, c.formErr
}

// publicURL returns the URL the sender called (see PublicURL).
func (c *call) publicURL() string { return PublicURL(c.r, c.v.publicURL) }

// json returns the JSON document the mapping sees: the raw body, the form
// as one object when the provider posts forms and this request is one, or
// what a provider's scheme set (a decrypted body).
func (c *call) json() []byte {
	if c.payloadDone {
		return c.payload
	}
	c.payloadDone = true
	c.payload = c.r.Body
	if m := c.v.p.ArrayMember; m != "" {
		if t := bytes.TrimSpace(c.r.Body); len(t) > 0 && t[0] == '[' {
			b := make([]byte, 0, len(t)+len(m)+8)
			b = jsonenc.AppendString(append(b, '{'), m)
			b = append(append(append(b, ':'), t...), '}')
			c.payload, c.replaced = b, true
			return c.payload
		}
	}
	if c.v.p.Body != BodyJSON && c.r.isForm() {
		if f, err := c.parsedForm(); err == nil {
			c.payload, c.replaced = f.JSON(c.v.p.FormJSONFields...), true
		} else {
			c.payload = nil
		}
	}
	c.dropFields()
	return c.payload
}

// dropFields removes the provider's DropFields from the payload.
func (c *call) dropFields() {
	if len(c.v.p.DropFields) == 0 || c.payload == nil {
		return
	}
	if out, changed := dropMembers(c.payload, c.v.p.DropFields); changed {
		c.payload, c.replaced = out, true
	}
}

// setPayload replaces the JSON the mapping sees (a decrypted body).
func (c *call) setPayload(b []byte) {
	c.payloadDone, c.payload, c.replaced = true, b, true
}

// bodySHA256 returns the hex SHA-256 of the raw body.
func (c *call) bodySHA256() string {
	sum := sha256.Sum256(c.r.Body)
	return hex.EncodeToString(sum[:])
}

// PayloadError is a request whose signature verified but whose body is not
// what the provider sends (a form that does not parse, an encrypted body
// that does not decrypt to JSON): the caller answers 400, not 401.
type PayloadError struct{ Reason string }

// Error implements error.
func (e *PayloadError) Error() string { return "verified body unusable: " + e.Reason }

// UnavailableError is a request that could not be verified because a key
// or certificate could not be fetched (SNS certificates, JWKS URLs): the
// sender is not at fault, the caller answers 503 and does not count it
// toward the lockout.
type UnavailableError struct{ Reason string }

// Error implements error.
func (e *UnavailableError) Error() string { return "verification unavailable: " + e.Reason }

// errNotHandshake is returned by handshake detectors that found nothing.
var errNotHandshake = errors.New("not a handshake")
