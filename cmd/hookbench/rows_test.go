package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSelectRows(t *testing.T) {
	tests := []struct {
		list      string
		want      []string // after withBases
		wantError bool
	}{
		{list: "all", want: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w"}},
		{list: "t", want: []string{"b", "c", "t", "v"}}, // the token twin its signature's cost is taken above
		{list: "s,v", want: []string{"b", "c", "s", "v"}},
		{list: "w", want: []string{"b", "c", "i", "l", "w"}},
		{list: "q,r", want: []string{"a", "b", "c", "e", "q", "r"}},
		{list: "m", want: []string{"b", "c", "i", "m"}},
		{list: "p", want: []string{"b", "c", "i", "m", "p"}},
		{list: "k", want: []string{"b", "c", "k"}},
		{list: "c", want: []string{"b", "c"}},
		{list: "i", want: []string{"b", "c", "i"}},
		{list: "f, e", want: []string{"a", "e", "f"}},
		{list: "a,z", wantError: true},
	}
	for _, tt := range tests {
		rows, err := selectRows(tt.list)
		if (err != nil) != tt.wantError {
			t.Fatalf("%q: err = %v", tt.list, err)
		}
		if err != nil {
			continue
		}
		var got []string
		for _, r := range withBases(rows) {
			got = append(got, r.id)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: rows %v, want %v", tt.list, got, tt.want)
		}
	}
}

// TestBuildRequest parses every row's request with net/http.
func TestBuildRequest(t *testing.T) {
	for _, r := range rowCatalogue() {
		for _, fwd := range []bool{false, true} {
			raw, at := buildRequest(r, "127.0.0.1:9", "tok", fwd)
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
			if err != nil {
				t.Fatalf("(%s): %v", r.id, err)
			}
			body, _ := io.ReadAll(req.Body)
			if req.Method != http.MethodPost || req.URL.Path != r.path || string(body) != r.body ||
				req.Header.Get("Authorization") != "Bearer tok" || req.Host != "127.0.0.1:9" {
				t.Fatalf("(%s): parsed %s %s host %q body %q", r.id, req.Method, req.URL, req.Host, body)
			}
			xff := req.Header.Get("X-Forwarded-For")
			if !fwd {
				if xff != "" || at != 0 {
					t.Fatalf("(%s): unexpected X-Forwarded-For %q", r.id, xff)
				}
				continue
			}
			if _, err := netip.ParseAddr(xff); err != nil || string(raw[at:at+forwardedWidth]) != xff {
				t.Fatalf("(%s): X-Forwarded-For %q at %d: %v", r.id, xff, at, err)
			}
		}
	}
}

func TestWrongToken(t *testing.T) {
	for _, tok := range []string{"abc", "xxxx", randomToken()} {
		w := wrongToken(tok)
		if len(w) != len(tok) {
			t.Fatalf("%q: length %d", tok, len(w))
		}
		for i := range w {
			if w[i] == tok[i] {
				t.Fatalf("%q and %q agree at %d", tok, w, i)
			}
		}
	}
}

func TestRoundOrder(t *testing.T) {
	rows := []rowDef{{id: "b"}, {id: "c"}, {id: "k"}}
	for round, want := range map[int]string{1: "bck", 2: "ckb", 3: "kbc", 4: "bck"} {
		got := ""
		for _, r := range roundOrder(rows, round) {
			got += r.id
		}
		if got != want {
			t.Errorf("round %d: %s, want %s", round, got, want)
		}
	}
	if rows[0].id != "b" {
		t.Fatal("roundOrder changed its input")
	}
}

// TestWatchedRow: row (w) is (l)'s site on its own base path, so that
// its console and cluster tail select its handler.
func TestWatchedRow(t *testing.T) {
	s, _ := findRow(rowCatalogue(), "w")
	l, _ := findRow(rowCatalogue(), "l")
	if !s.watched || s.path != watchedPath+"/wake" || !strings.Contains(s.site, "hooks "+watchedPath+" {") ||
		strings.Replace(s.site, "hooks "+watchedPath+" {", "hooks {", 1) != strings.ReplaceAll(l.site, "bench_l", "bench_w") {
		t.Errorf("row (w): path %q, site\n%s\nwant (l)'s site\n%s\non %s", s.path, s.site, l.site, watchedPath)
	}
}

// TestSignedRequest: the signed rows' requests parse, carry no hook token,
// carry the provider's signature (verified here with the public key or
// the secret, independently of caddyhook) and an Idempotency-Key that is
// rewritten in place.
func TestSignedRequest(t *testing.T) {
	s, err := newSigners("tok-" + strings.Repeat("x", 40))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rowCatalogue() {
		if r.signed == "" {
			continue
		}
		n++
		raw, at, err := s.signedRequest(r, "127.0.0.1:9", time.Now())
		if err != nil {
			t.Fatalf("(%s): %v", r.id, err)
		}
		putDigits(raw[at:at+keyWidth], 42)
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatalf("(%s): %v", r.id, err)
		}
		body, _ := io.ReadAll(req.Body)
		wantAuth := ""
		if r.signed == "token" {
			wantAuth = "Bearer " + s.token
		}
		if req.URL.Path != r.path || string(body) != r.body || req.Header.Get("Authorization") != wantAuth ||
			req.Header.Get("Idempotency-Key") != "00000000000000000042" {
			t.Fatalf("(%s): %s body %q headers %v", r.id, req.URL, body, req.Header)
		}
		ts := req.Header.Get("X-Signature-Timestamp") + req.Header.Get("X-Twilio-Email-Event-Webhook-Timestamp")
		ok := false
		switch r.signed {
		case "token":
			ok = !strings.Contains(r.site, "verify")
		case "github":
			m := hmac.New(sha256.New, []byte(s.githubSecret))
			m.Write(body)
			ok = req.Header.Get("X-Hub-Signature-256") == "sha256="+hex.EncodeToString(m.Sum(nil))
		case "discord":
			sig, _ := hex.DecodeString(req.Header.Get("X-Signature-Ed25519"))
			ok = ed25519.Verify(s.discord.Public().(ed25519.PublicKey), append([]byte(ts), body...), sig)
		case "sendgrid":
			sig, _ := base64.StdEncoding.DecodeString(req.Header.Get("X-Twilio-Email-Event-Webhook-Signature"))
			sum := sha256.Sum256(append([]byte(ts), body...))
			ok = ecdsa.VerifyASN1(&s.sendgrid.PublicKey, sum[:], sig)
		}
		if !ok {
			t.Errorf("(%s): the %s signature does not verify", r.id, r.signed)
		}
		if r.signed != "token" && !strings.Contains(r.site, "verify "+r.signed) {
			t.Errorf("(%s): the site does not verify %s", r.id, r.signed)
		}
	}
	if n != 4 {
		t.Fatalf("%d signed rows, want 4 (github, discord, sendgrid and their token twin)", n)
	}
}
