package verify

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkVerify measures one successful verification of a 4 KiB JSON
// body per scheme, with one secret and with a two-secret rotation (the
// matching secret last, so both MACs are always computed anyway).
func BenchmarkVerify(b *testing.B) {
	head := `{"id":"evt_1","event_id":"Ev1","type":"event_callback","pad":"`
	body := head + strings.Repeat("x", 4096-len(head)-2) + `"}`
	now := ts(0)
	cases := []struct {
		name string
		cfg  Config
		h    http.Header
	}{
		{"github", Config{Scheme: SchemeGitHub, Secrets: []string{githubSecret}},
			hdr("X-Hub-Signature-256", "sha256="+hexSHA256(githubSecret, body), "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")},
		{"stripe", Config{Scheme: SchemeStripe, Secrets: []string{stripeSecret}}, hdr("Stripe-Signature", stripeHeader(now, body, stripeSecret))},
		{"slack", Config{Scheme: SchemeSlack, Secrets: []string{slackSecret}},
			hdr("X-Slack-Signature", slackSig(slackSecret, now, body), "X-Slack-Request-Timestamp", now)},
		{"standard", Config{Scheme: SchemeStandard, Secrets: []string{standardSecret}},
			hdr("Webhook-Id", "msg_1", "Webhook-Timestamp", now, "Webhook-Signature", standardSig(b, standardSecret, "msg_1", now, body))},
		{"hmac", Config{Scheme: SchemeHMAC, Secrets: []string{genericSecret}, Header: "X-Sig", TimestampHeader: "X-Ts", Layout: "{timestamp}.{body}"},
			hdr("X-Sig", hexSHA256(genericSecret, now, ".", body), "X-Ts", now)},
		{"github/2-secrets", Config{Scheme: SchemeGitHub, Secrets: []string{otherSecret, githubSecret}},
			hdr("X-Hub-Signature-256", "sha256="+hexSHA256(githubSecret, body))},
	}
	raw := []byte(body)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			v := mustNew(b, c.cfg)
			if _, err := v.Verify(c.h, raw, testNow); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(c.h, raw, testNow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchBodySize is the body size of BenchmarkProviders.
const benchBodySize = 4096

// BenchmarkProviders measures one successful verification per provider,
// side by side: HMAC providers on a 4 KiB body re-signed under their own
// scheme (so each pays its MAC, its header parsing and its id and event
// reads), token providers on the same body, Ed25519 and ECDSA on a 4 KiB
// body signed by the test keys, and the rest (SNS, Pub/Sub, Feishu, …) on
// their vector (certificates and key sets cached, as in steady state).
func BenchmarkProviders(b *testing.B) {
	for _, p := range all() {
		b.Run(p.Name, func(b *testing.B) {
			v, r, vec := benchSetup(b, p)
			b.SetBytes(int64(len(r.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.VerifyRequest(benchClone(r), vec.now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchSetup builds p's verifier and its first vector's request, padded
// and re-signed (benchRequest), and checks that it verifies.
func benchSetup(b *testing.B, p *Provider) (*Verifier, *Request, vector) {
	pt := providerTestsByName[p.Name]
	vec := pt.vectors[0]
	if p.Name == "sendgrid" {
		vec = pt.vectors[1] // signed by a test key the benchmark can re-sign with
	}
	env := Env{}
	if pt.env != nil {
		env = pt.env(&testing.T{})
	}
	v, err := NewWithEnv(vec.cfg, env)
	if err != nil {
		b.Fatal(err)
	}
	r := benchRequest(b, p, v, vec)
	if _, err := v.VerifyRequest(benchClone(r), vec.now); err != nil {
		b.Fatalf("%s: %v", p.Name, err)
	}
	return v, r, vec
}

// benchClone copies r shallowly (the header map is read-only in Verify).
func benchClone(r *Request) *Request { c := *r; return &c }

// benchRequest returns the provider's first vector with its body padded to
// benchBodySize and re-signed where the scheme allows.
func benchRequest(b *testing.B, p *Provider, v *Verifier, vec vector) *Request {
	r := vec.req()
	switch s := unwrap(v.scheme).(type) {
	case *macScheme:
		r.Body = pad(r.Body)
		signMAC(v, s, r, vec.now)
	case *genericScheme:
		r.Body = pad(r.Body)
		signMAC(v, s.macScheme, r, vec.now)
	case *capturedScheme:
		r.Body = pad(r.Body)
		signMAC(v, s.cur.Load().mac, r, vec.now)
	case *standardScheme:
		r.Body = pad(r.Body)
		names := family(r.Header)
		id, tsv := r.Header.Get(names.id), r.Header.Get(names.timestamp)
		r.Header.Set(names.signature, standardSig(b, vec.cfg.Secrets[0], id, tsv, string(r.Body)))
	case *tokenScheme:
		if s.header != "" {
			r.Body = pad(r.Body)
		}
	case *pubScheme:
		r.Body = pad(r.Body)
		tsv := r.Header.Get(s.spec.tsHeader)
		msg := []byte(tsv + s.spec.sep + string(r.Body))
		switch p.Name {
		case "discord":
			r.Header.Set(s.spec.sigHeader, hex.EncodeToString(ed25519.Sign(discordKey, msg)))
		case "telnyx":
			r.Header.Set(s.spec.sigHeader, base64.StdEncoding.EncodeToString(ed25519.Sign(telnyxKey, msg)))
		case "sendgrid":
			r.Header.Set(s.spec.sigHeader, sendgridSig(sendgridKey, tsv, string(r.Body)))
		default:
			b.Fatalf("no bench key for %s", p.Name)
		}
	}
	return r
}

// pad grows a JSON object, JSON array or form body to benchBodySize.
func pad(body []byte) []byte {
	n := benchBodySize - len(body) - len(`"pad":"",`)
	if n <= 0 {
		return body
	}
	fill := strings.Repeat("x", n)
	s := string(body)
	switch {
	case strings.HasPrefix(s, "{"):
		return []byte(`{"pad":"` + fill + `",` + s[1:])
	case strings.HasPrefix(s, "["):
		return []byte(`[{"pad":"` + fill[:n-2] + `"},` + s[1:])
	case strings.Contains(s, "="):
		return []byte("pad=" + fill + "&" + s)
	}
	return []byte(`{"pad":"` + fill + `"}`)
}

// signMAC signs r in place under the first secret of ms, as the provider
// would: the same signed content as Verify reads.
func signMAC(v *Verifier, ms *macScheme, r *Request, now time.Time) {
	spec := ms.spec
	var ts string
	switch spec.tsUnit {
	case unitSeconds:
		ts = strconv.FormatInt(now.Unix(), 10)
	case unitMillis:
		ts = strconv.FormatInt(now.UnixMilli(), 10)
	case unitRFC3339:
		ts = now.UTC().Format(time.RFC3339)
	}
	if spec.tsFrom == tsHeader {
		r.Header.Set(spec.tsHeader, ts)
	}
	var hdrVals [maxParts]string
	for i, p := range spec.parts {
		if p.kind == partHeader {
			hdrVals[i] = r.Header.Get(p.header)
		}
	}
	c := &call{v: v, r: r, now: now}
	content, err := ms.content(c, nil, ts, &hdrVals)
	if err != nil {
		panic(err)
	}
	sum := ms.m.sum(0, nil, content...)
	sig := hex.EncodeToString(sum)
	if spec.enc == encBase64 {
		sig = base64.StdEncoding.EncodeToString(sum)
	}
	val := spec.prefix + sig
	if l := spec.list; l != nil {
		val = l.sigKey + "=" + sig
		if l.tsKey != "" {
			val = l.tsKey + "=" + ts + l.sep + val
		}
	}
	for _, h := range spec.headers[1:] {
		r.Header.Del(h)
	}
	r.Header.Set(spec.headers[0], val)
}

// BenchmarkRatioToGitHub measures each provider against github in one
// interleaved run: batches of 16 verifications in the order github,
// provider, provider, github (both on 4 KiB bodies), so load drift on a
// shared machine weighs on both sides alike; each batch is timed by the
// thread's CPU clock, which does not count waiting for a CPU. It reports the provider's ns per
// verification and its cost as a multiple of github's (x-github).
func BenchmarkRatioToGitHub(b *testing.B) {
	const batch = 16
	ghVec := providerTestsByName["github"].vectors[1]
	gh, err := New(ghVec.cfg)
	if err != nil {
		b.Fatal(err)
	}
	ghReq := benchRequest(b, lookup("github"), gh, ghVec)
	for _, p := range all() {
		b.Run(p.Name, func(b *testing.B) {
			v, r, vec := benchSetup(b, p)
			var ghTime, pTime time.Duration
			run := func(v *Verifier, r *Request, now time.Time) time.Duration {
				t0 := threadCPU()
				for range batch {
					if _, err := v.VerifyRequest(benchClone(r), now); err != nil {
						b.Fatal(err)
					}
				}
				return threadCPU() - t0
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for b.Loop() {
				// A B B A: a load change during the iteration weighs on both
				ghTime += run(gh, ghReq, ghVec.now)
				pTime += run(v, r, vec.now)
				pTime += run(v, r, vec.now)
				ghTime += run(gh, ghReq, ghVec.now)
			}
			b.ReportMetric(float64(pTime.Nanoseconds())/float64(2*b.N*batch), "ns/verify")
			b.ReportMetric(float64(pTime)/float64(ghTime), "x-github")
		})
	}
}

// BenchmarkPublicKeyChecks measures the public-key checks alone (no
// request handling) on a 4 KiB message: the floor of the Ed25519, ECDSA
// P-256 and RSA-2048 providers' cost per request.
func BenchmarkPublicKeyChecks(b *testing.B) {
	msg := []byte(strings.Repeat("x", benchBodySize))
	b.Run("ed25519", func(b *testing.B) {
		sig := ed25519.Sign(discordKey, msg)
		pub := discordKey.Public().(ed25519.PublicKey)
		for b.Loop() {
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("bad")
			}
		}
	})
	b.Run("ecdsa-p256", func(b *testing.B) {
		digest := sha256.Sum256(msg)
		sig, err := ecdsa.SignASN1(rand.Reader, sendgridKey, digest[:])
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			d := sha256.Sum256(msg)
			if !ecdsa.VerifyASN1(&sendgridKey.PublicKey, d[:], sig) {
				b.Fatal("bad")
			}
		}
	})
	b.Run("rsa-2048-sha256", func(b *testing.B) {
		k, _ := testRSA()
		digest := sha256.Sum256(msg)
		sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			d := sha256.Sum256(msg)
			if rsa.VerifyPKCS1v15(&k.PublicKey, crypto.SHA256, d[:], sig) != nil {
				b.Fatal("bad")
			}
		}
	})
	b.Run("hmac-sha256 (github)", func(b *testing.B) {
		m := newMACSet(algSHA256, [][]byte{[]byte(githubSecret)})
		var c candidates
		c.add(encHex, m.size, hexSHA256(githubSecret, string(msg)))
		for b.Loop() {
			if !m.match(&c, msg) {
				b.Fatal("bad")
			}
		}
	})
}
