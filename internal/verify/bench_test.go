package verify

import (
	"net/http"
	"strings"
	"testing"
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
