package verify

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// FuzzJSONValue checks the scanner against encoding/json: on a valid
// document, the value found at a path is the one encoding/json decodes
// there (last duplicate wins); nothing panics on anything.
func FuzzJSONValue(f *testing.F) {
	for _, s := range []string{
		`{"a":{"b":[1,{"c":"x"}]}}`, `{"a":1,"a":2}`, `{"\u0061":"esc"}`, `{"a":"q\"uote\\"}`, `[{"a":1}]`,
		`{"a" : [ ] , "b" : { } }`, `  {"a":null}  `, `{"a":1}x`, `{"a":`, `"str"`, `{"a":[1,2,3]}`,
	} {
		f.Add(s, "a", "1")
	}
	f.Fuzz(func(t *testing.T, doc, k1, k2 string) {
		for _, path := range [][]string{{k1}, {k1, k2}, {k1, "0"}} {
			got := jsonValue([]byte(doc), path...)
			var root any
			if json.Unmarshal([]byte(doc), &root) != nil {
				continue
			}
			want, ok := walk(root, path)
			if !ok {
				if got != nil {
					t.Fatalf("jsonValue(%q, %q) = %q, encoding/json finds nothing", doc, path, got)
				}
				continue
			}
			if got == nil {
				t.Fatalf("jsonValue(%q, %q) = nil, encoding/json finds %v", doc, path, want)
			}
			var v any
			if err := json.Unmarshal(got, &v); err != nil || !reflect.DeepEqual(v, want) {
				t.Fatalf("jsonValue(%q, %q) = %q (%v), want %v", doc, path, got, v, want)
			}
		}
		keys := topLevelKeys([]byte(doc))
		if len(keys) > maxTopKeys {
			t.Fatal("too many keys")
		}
		out, changed := dropMembers([]byte(doc), []string{k1})
		if changed {
			var m map[string]any
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("dropMembers(%q) = %q: %v", doc, out, err)
			}
			if _, ok := m[k1]; ok {
				t.Fatalf("dropMembers(%q) kept %q", doc, k1)
			}
		}
	})
}

// walk follows path in a decoded document as jsonValue does.
func walk(v any, path []string) (any, bool) {
	for _, k := range path {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return nil, false
			}
		case []any:
			i := 0
			for _, c := range k {
				if c < '0' || c > '9' {
					return nil, false
				}
				i = i*10 + int(c-'0')
				if i > 1<<20 {
					return nil, false
				}
			}
			if k == "" || (len(k) > 1 && k[0] == '0') || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// FuzzForm checks the form parser: it never panics, its JSON is valid and
// holds every field (as url.ParseQuery decodes it when both accept the
// body), and sortedPairs is deterministic.
func FuzzForm(f *testing.F) {
	for _, s := range []string{"a=1&b=2", "a=1&a=2", "payload=%7B%22x%22%3A1%7D", "a+b=c+d", "=x", "a=%zz", "&&a&", "k=%E2%82%AC", "a=%ff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		form, err := ParseForm([]byte(body))
		if err != nil {
			if _, ok := err.(*FormError); !ok {
				t.Fatalf("error %T", err)
			}
			return
		}
		doc := form.JSON("payload")
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatalf("JSON(%q) = %q: %v", body, doc, err)
		}
		if len(m) != len(form.Keys()) {
			t.Fatalf("JSON(%q) has %d members for %d fields", body, len(m), len(form.Keys()))
		}
		if q, err := url.ParseQuery(body); err == nil && !strings.Contains(body, ";") {
			for k, vs := range q {
				got := form.Values(k)
				if !reflect.DeepEqual(got, vs) && !(len(vs) == 1 && vs[0] == "" && got == nil) {
					t.Fatalf("ParseForm(%q)[%q] = %q, url.ParseQuery %q", body, k, got, vs)
				}
			}
		}
		if !bytes.Equal(form.sortedPairs(nil), form.sortedPairs(nil)) {
			t.Fatal("sortedPairs not deterministic")
		}
	})
}

// FuzzJWT checks the token parser and the claims decoding: no panic, and
// an accepted token re-joins to what was sent.
func FuzzJWT(f *testing.F) {
	f.Add(hs256("k", `{"exp":1,"aud":["a"],"email_verified":"true"}`))
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("a.b.c.d")
	f.Add("..")
	f.Fuzz(func(t *testing.T, tok string) {
		j, err := parseJWT(tok)
		if err != nil {
			return
		}
		if string(j.signed) != tok[:strings.LastIndexByte(tok, '.')] {
			t.Fatalf("signed part %q of %q", j.signed, tok)
		}
		cl, ok := readClaims(j)
		if ok {
			_ = cl.hasAudience("a")
			_ = cl.emailVerified()
			_ = cl.checkTimes(testNow, 0, true, "")
		}
		keys := jwtKeys{hmacKeys: [][]byte{[]byte("k")}}
		_ = keys.verifySig(t.Context(), j, testNow, "")
	})
}

// FuzzKeys checks public key and key set decoding: no panic, and an
// accepted key is of a supported type.
func FuzzKeys(f *testing.F) {
	f.Add(pkixB64(otherP256.Public()))
	f.Add("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==")
	f.Add(strings.Repeat("ab", 32))
	f.Add("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----")
	f.Add(`{"keys":[{"kty":"EC","crv":"P-256","x":"` + strings.Repeat("A", 43) + `","y":"` + strings.Repeat("A", 43) + `"}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		if k, err := ParsePublicKey(s); err == nil {
			if kind := keyKind(k); !strings.HasPrefix(kind, "an ") {
				t.Fatalf("ParsePublicKey(%q) = %s", s, kind)
			}
		}
		if set, err := ParseJWKS([]byte(s)); err == nil && (len(set) == 0 || len(set) > maxJWKSKeys) {
			t.Fatalf("ParseJWKS(%q) = %d keys", s, len(set))
		}
	})
}

// FuzzHandshakes sends arbitrary methods, queries, headers and bodies to
// every provider with a handshake (and SNS's message reader): no panic,
// only the package's error types, and an answer is a 2xx whose text
// content is printable.
func FuzzHandshakes(f *testing.F) {
	f.Add("GET", "hub.mode=subscribe&hub.challenge=1&hub.verify_token=x", "", `{}`)
	f.Add("POST", "validationToken=a+b", "X-Hook-Secret", `{"type":"url_verification","challenge":"c","token":"t"}`)
	f.Add("POST", "", "X-Okta-Verification-Challenge", `{"Type":"SubscriptionConfirmation","TopicArn":"arn:aws:sns:us-west-2:123456789012:MyTopic","SubscribeURL":"https://sns.us-west-2.amazonaws.com/x","Signature":"AA==","SignatureVersion":"2","SigningCertURL":"https://sns.us-west-2.amazonaws.com/a.pem","Timestamp":"2023-11-14T22:13:20Z"}`)
	f.Add("POST", "", "", `{"encrypt":"P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk="}`)
	f.Add("HEAD", "crc_token=abc&challenge=z", "", `webhook_id=1`)
	var vs []*Verifier
	for _, p := range all() {
		if p.Handshake == "" && p.Name != "sns" {
			continue
		}
		pt := providerTestsByName[p.Name]
		env := Env{HTTPClient: &http.Client{Transport: &stubTransport{pages: map[string]string{}, hits: map[string]int{}}}}
		v, err := NewWithEnv(pt.vectors[0].cfg, env)
		if err != nil {
			f.Fatal(err)
		}
		vs = append(vs, v)
	}
	f.Fuzz(func(t *testing.T, method, query, header, body string) {
		r := &Request{Method: method, URL: &url.URL{Path: "/", RawQuery: query}, Header: http.Header{}, Body: []byte(body)}
		if header != "" && isTokenString(header) {
			r.Header.Set(header, body)
		}
		for _, v := range vs {
			a, err := v.Handshake(clone(r), testNow)
			if a != nil {
				if err != nil || a.Status < 200 || a.Status > 299 || a.What == "" {
					t.Fatalf("%s: %+v, %v", v.name, a, err)
				}
				if strings.HasPrefix(a.Header.Get("Content-Type"), "text/plain") && cleanChallenge(string(a.Body)) != string(a.Body) {
					t.Fatalf("%s echoed %q", v.name, a.Body)
				}
				if a.Header.Get("Content-Type") == "application/json" && !json.Valid(a.Body) {
					t.Fatalf("%s answered invalid JSON %q", v.name, a.Body)
				}
			}
			_, _ = v.VerifyRequest(clone(r), testNow)
		}
	})
}

// isTokenString reports whether s is a valid header name.
func isTokenString(s string) bool {
	_, err := headerName("h", s)
	return err == nil
}

// FuzzPublicURL checks the URL reconstruction: the path and query are
// kept as received, and the scheme is only ever http or https.
func FuzzPublicURL(f *testing.F) {
	f.Add("/hooks/p", "a=1&b=%2F", "hooks.example.com", "https", "proxy.example", true, false)
	f.Fuzz(func(t *testing.T, path, query, host, proto, fwdHost string, trusted, tls bool) {
		u := &url.URL{Path: path, RawQuery: query}
		r := &Request{URL: u, Host: host, TLS: tls, TrustedProxy: trusted,
			Header: http.Header{"X-Forwarded-Proto": {proto}, "X-Forwarded-Host": {fwdHost}}}
		got := PublicURL(r, "")
		if !strings.HasPrefix(got, "http://") && !strings.HasPrefix(got, "https://") {
			t.Fatalf("PublicURL = %q", got)
		}
		if tls && !strings.HasPrefix(got, "https://") {
			t.Fatalf("TLS request reconstructed as %q", got)
		}
		if !trusted && !strings.HasPrefix(got, "http://"+host) && !strings.HasPrefix(got, "https://"+host) {
			t.Fatalf("an untrusted X-Forwarded-Host was used: %q", got)
		}
		if query != "" && !strings.HasSuffix(got, "?"+query) {
			t.Fatalf("query lost: %q", got)
		}
		if pub := PublicURL(r, "https://edge.example.com/x"); !strings.HasPrefix(pub, "https://edge.example.com/x/") && !strings.HasPrefix(pub, "https://edge.example.com/x?") {
			if !strings.HasPrefix(u.EscapedPath(), "/") && u.EscapedPath() != "" {
				return
			}
			t.Fatalf("public_url ignored: %q", pub)
		}
	})
}
