package verify

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// FuzzSignatureHeaders feeds arbitrary header values to every signature
// header parser and checks their invariants: no panic, bounded output,
// and that whatever they accept re-encodes to what was sent.
func FuzzSignatureHeaders(f *testing.F) {
	for _, seed := range []string{
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		"t=1700000000,v1=" + strings.Repeat("ab", 32) + ",v0=" + strings.Repeat("cd", 32),
		"t=1,t=2,v1=", ",,,=,=v1", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1a,abc",
		"v1," + strings.Repeat("A", 43) + "=", "  v1,  ,v1 v1,", "{timestamp}.{body}", "{body}{id}{",
		"v0=" + strings.Repeat("0", 64), strings.Repeat("v1,x ", 40), "1700000000", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, size := range []int{sha1.Size, sha256.Size, sha512.Size} {
			for _, enc := range []encoding{encHex, encBase64} {
				var c candidates
				r := parsePrefixed(v, "sha256=", enc, size, &c)
				checkCandidates(t, r, &c, 1)
				if r == "" {
					got := encodeSig(enc, c.sig[0][:size])
					if want := strings.TrimPrefix(v, "sha256="); !strings.EqualFold(got, want) {
						t.Fatalf("parsePrefixed(%q) decoded to %q", v, got)
					}
				}
			}
			var c candidates
			tstamp, r := parseStripe(v, size, &c)
			checkCandidates(t, r, &c, MaxSignatures)
			if r == "" && (tstamp == "" || c.n == 0 || !strings.Contains(v, "t="+tstamp)) {
				t.Fatalf("parseStripe(%q) accepted t=%q with %d signatures", v, tstamp, c.n)
			}
			if r == "" {
				for i := range c.n {
					if !strings.Contains(strings.ToLower(v), "v1="+hex.EncodeToString(c.sig[i][:size])) {
						t.Fatalf("parseStripe(%q): signature %d not in header", v, i)
					}
				}
			}
			c = candidates{}
			r = parseStandard(v, size, &c)
			checkCandidates(t, r, &c, MaxSignatures)
			if r == "" {
				for i := range c.n {
					if !strings.Contains(v, "v1,"+base64.StdEncoding.EncodeToString(c.sig[i][:size])) {
						t.Fatalf("parseStandard(%q): signature %d not in header", v, i)
					}
				}
			}
		}
		if n, ok := parseUnix(v); ok {
			if back := strconv.FormatInt(n, 10); strings.TrimLeft(v, "0") != strings.TrimLeft(back, "0") {
				t.Fatalf("parseUnix(%q) = %d", v, n)
			}
		}
		if l, err := parseLayout(v); err == nil {
			if strings.ReplaceAll(renderLayout(l), "|", "") != v && !strings.Contains(v, "|") {
				t.Fatalf("parseLayout(%q) rendered %q", v, renderLayout(l))
			}
		}
	})
}

// checkCandidates fails unless a parse result is a known reason or
// success with between 1 and maxN candidates.
func checkCandidates(t *testing.T, reason string, c *candidates, maxN int) {
	t.Helper()
	switch reason {
	case "":
		if c.n < 1 || c.n > maxN {
			t.Fatalf("success with %d candidates", c.n)
		}
	case ReasonMalformedSignature, ReasonTooManySignatures, ReasonUnsupportedVersion:
	default:
		t.Fatalf("unknown reason %q", reason)
	}
}

// encodeSig encodes b the way enc expects it.
func encodeSig(enc encoding, b []byte) string {
	if enc == encBase64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	return hex.EncodeToString(b)
}

// FuzzVerify drives every scheme's Verify with arbitrary headers and body:
// it must never panic, must fail only with a known *Error, and must accept
// only requests whose signature an independent HMAC reproduces.
func FuzzVerify(f *testing.F) {
	body := `{"id":"evt_1","type":"url_verification","challenge":"c1","event_id":"Ev1"}`
	f.Add(uint8(0), "sha256="+hexSHA256(githubSecret, body), "", "d1", body)
	f.Add(uint8(1), stripeHeader(ts(0), body, stripeSecret), "", "", body)
	f.Add(uint8(2), slackSig(slackSecret, ts(0), body), ts(0), "", body)
	f.Add(uint8(3), standardSig(f, standardSecret, "m1", ts(0), body), ts(0), "m1", body)
	f.Add(uint8(4), "sha256="+hexSHA256(genericSecret, "m1", ":", ts(0), ":", body), ts(0), "m1", body)
	f.Add(uint8(1), "t=,v1=,", "x", "\x00", "")
	verifiers := []*Verifier{
		mustNew(f, Config{Scheme: SchemeGitHub, Secrets: []string{githubSecret}}),
		mustNew(f, Config{Scheme: SchemeStripe, Secrets: []string{stripeSecret}}),
		mustNew(f, Config{Scheme: SchemeSlack, Secrets: []string{slackSecret}}),
		mustNew(f, Config{Scheme: SchemeStandard, Secrets: []string{standardSecret}}),
		mustNew(f, Config{Scheme: SchemeHMAC, Secrets: []string{genericSecret}, Header: "X-Sig", Prefix: "sha256=",
			TimestampHeader: "X-Ts", IDHeader: "X-Id", Layout: "{id}:{timestamp}:{body}"}),
	}
	sigHeaders := []string{"X-Hub-Signature-256", "Stripe-Signature", "X-Slack-Signature", "Webhook-Signature", "X-Sig"}
	known := map[string]bool{ReasonMissingSignature: true, ReasonMissingTimestamp: true, ReasonMissingID: true,
		ReasonDuplicateHeader: true, ReasonMalformedSignature: true, ReasonTooManySignatures: true,
		ReasonUnsupportedVersion: true, ReasonMalformedTimestamp: true, ReasonStaleTimestamp: true,
		ReasonBadSignature: true, ReasonBadChallenge: true}
	f.Fuzz(func(t *testing.T, which uint8, sig, tstamp, id, body string) {
		i := int(which) % len(verifiers)
		h := hdr(sigHeaders[i], sig, "X-GitHub-Delivery", id, "X-Slack-Request-Timestamp", tstamp,
			"Webhook-Timestamp", tstamp, "Webhook-Id", id, "X-Ts", tstamp, "X-Id", id)
		res, err := verifiers[i].Verify(h, []byte(body), testNow)
		if err != nil {
			var ve *Error
			if !errors.As(err, &ve) || !known[ve.Reason] {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(res.DeliveryID) > MaxDeliveryIDLen || len(res.Challenge) > MaxDeliveryIDLen {
			t.Fatalf("oversized result %+v", res)
		}
		s, ts, id := trimOWS(sig), trimOWS(tstamp), trimOWS(id)
		var want string // the one signature the header must carry
		switch i {
		case 0:
			want = "sha256=" + hexSHA256(githubSecret, body)
		case 1:
			want = "v1=" + hexSHA256(stripeSecret, stripeT(s), ".", body)
		case 2:
			want = slackSig(slackSecret, ts, body)
		case 3:
			want = standardSig(t, standardSecret, id, ts, body)
		case 4:
			want = "sha256=" + hexSHA256(genericSecret, id, ":", ts, ":", body)
		}
		if !strings.Contains(strings.ToLower(s), strings.ToLower(want)) && !strings.Contains(s, want) {
			t.Fatalf("scheme %d accepted %q over %q, expected %q", i, s, body, want)
		}
	})
}

// stripeT returns the t entry of a Stripe-Signature value, independently
// of parseStripe.
func stripeT(v string) string {
	for _, item := range strings.Split(v, ",") {
		if t, ok := strings.CutPrefix(strings.Trim(item, " \t"), "t="); ok {
			return t
		}
	}
	return ""
}

// parseStripe (what FuzzStripe reads) parses a Stripe-Signature value: comma-separated key=value
// entries with exactly one t and at least one v1 (other keys, such as v0,
// are ignored). It returns t as sent, or a Reason on failure.
func parseStripe(v string, size int, c *candidates) (ts, reason string) {
	return parseList(v, stripeList, encHex, size, c)
}
