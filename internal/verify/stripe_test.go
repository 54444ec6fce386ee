package verify

import (
	"strings"
	"testing"
	"time"
)

// stripeHeader builds a Stripe-Signature value for t with one v1 entry per
// secret.
func stripeHeader(t, body string, secrets ...string) string {
	out := "t=" + t
	for _, s := range secrets {
		out += ",v1=" + hexSHA256(s, t, ".", body)
	}
	return out
}

func TestStripe(t *testing.T) {
	body := `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"payment_intent.succeeded"}`
	now := ts(0)
	good := stripeHeader(now, body, stripeSecret)
	v1 := good[strings.Index(good, "v1="):]
	want := Result{DeliveryID: "evt_1NG8Du2eZvKYlo2CUI79vXWy"}
	v := mustNew(t, Config{Scheme: SchemeStripe, Secrets: []string{stripeSecret}})
	runCases(t, v, []reqCase{
		{name: "valid", h: hdr("Stripe-Signature", good), body: body, want: want},
		{name: "v0 and unknown keys ignored", h: hdr("Stripe-Signature", "t="+now+",v0="+strings.Repeat("0", 64)+",v9=x,"+v1), body: body, want: want},
		{name: "v1 before t", h: hdr("Stripe-Signature", v1+",t="+now), body: body, want: want},
		{name: "blanks around entries", h: hdr("Stripe-Signature", "t="+now+" , "+v1), body: body, want: want},
		{name: "several v1, second valid", h: hdr("Stripe-Signature", stripeHeader(now, body, otherSecret, stripeSecret)), body: body, want: want},
		{name: "several v1, none valid", h: hdr("Stripe-Signature", stripeHeader(now, body, otherSecret, "yet-another-secret-0000")), body: body, wantReason: ReasonBadSignature},
		{name: "body without id", h: hdr("Stripe-Signature", stripeHeader(now, "{}", stripeSecret)), body: "{}"},
		{name: "body not JSON", h: hdr("Stripe-Signature", stripeHeader(now, "hello", stripeSecret)), body: "hello"},
		{name: "numeric id", h: hdr("Stripe-Signature", stripeHeader(now, `{"id":7}`, stripeSecret)), body: `{"id":7}`, want: Result{DeliveryID: "7"}},
		{name: "id an object", h: hdr("Stripe-Signature", stripeHeader(now, `{"id":{"a":1}}`, stripeSecret)), body: `{"id":{"a":1}}`},
		{name: "nested id only", h: hdr("Stripe-Signature", stripeHeader(now, `{"data":{"id":"x"}}`, stripeSecret)), body: `{"data":{"id":"x"}}`},
		{name: "at past tolerance edge", h: hdr("Stripe-Signature", stripeHeader(ts(-300*time.Second), body, stripeSecret)), body: body, want: want},
		{name: "at future tolerance edge", h: hdr("Stripe-Signature", stripeHeader(ts(300*time.Second), body, stripeSecret)), body: body, want: want},
		{name: "stale", h: hdr("Stripe-Signature", stripeHeader(ts(-301*time.Second), body, stripeSecret)), body: body, wantReason: ReasonStaleTimestamp},
		{name: "future", h: hdr("Stripe-Signature", stripeHeader(ts(301*time.Second), body, stripeSecret)), body: body, wantReason: ReasonStaleTimestamp},
		{name: "millisecond timestamp", h: hdr("Stripe-Signature", stripeHeader(now+"000", body, stripeSecret)), body: body, wantReason: ReasonMalformedTimestamp},
		{name: "signed timestamp differs from sent", h: hdr("Stripe-Signature", "t="+ts(time.Second)+","+v1), body: body, wantReason: ReasonBadSignature},
		{name: "signature over body alone", h: hdr("Stripe-Signature", "t="+now+",v1="+hexSHA256(stripeSecret, body)), body: body, wantReason: ReasonBadSignature},
		{name: "wrong secret", h: hdr("Stripe-Signature", stripeHeader(now, body, otherSecret)), body: body, wantReason: ReasonBadSignature},
		{name: "decoded secret is not the key", h: hdr("Stripe-Signature", "t="+now+",v1="+hexSHA256(strings.TrimPrefix(stripeSecret, "whsec_"), now, ".", body)), body: body, wantReason: ReasonBadSignature},
		{name: "tampered body", h: hdr("Stripe-Signature", good), body: strings.Replace(body, "succeeded", "failed", 1), wantReason: ReasonBadSignature},
		{name: "one hex digit off", h: hdr("Stripe-Signature", flipHex(good)), body: body, wantReason: ReasonBadSignature},
		{name: "missing header", h: hdr(), body: body, wantReason: ReasonMissingSignature, wantHeader: "Stripe-Signature"},
		{name: "missing t", h: hdr("Stripe-Signature", v1), body: body, wantReason: ReasonMalformedSignature},
		{name: "t twice", h: hdr("Stripe-Signature", "t="+now+",t="+now+","+v1), body: body, wantReason: ReasonMalformedSignature},
		{name: "empty t", h: hdr("Stripe-Signature", "t=,"+v1), body: body, wantReason: ReasonMalformedSignature},
		{name: "non-numeric t", h: hdr("Stripe-Signature", "t=abc,"+v1), body: body, wantReason: ReasonMalformedTimestamp},
		{name: "signed t", h: hdr("Stripe-Signature", "t=+"+now+","+v1), body: body, wantReason: ReasonMalformedTimestamp},
		{name: "only v0", h: hdr("Stripe-Signature", "t="+now+",v0="+strings.Repeat("a", 64)), body: body, wantReason: ReasonUnsupportedVersion},
		{name: "entry without =", h: hdr("Stripe-Signature", good+",junk"), body: body, wantReason: ReasonMalformedSignature},
		{name: "empty entry", h: hdr("Stripe-Signature", "t="+now+",,"+v1), body: body, wantReason: ReasonMalformedSignature},
		{name: "v1 not hex", h: hdr("Stripe-Signature", "t="+now+",v1="+strings.Repeat("z", 64)), body: body, wantReason: ReasonMalformedSignature},
		{name: "v1 too short", h: hdr("Stripe-Signature", good[:len(good)-2]), body: body, wantReason: ReasonMalformedSignature},
		{name: "17 v1 entries", h: hdr("Stripe-Signature", "t="+now+strings.Repeat(","+v1, MaxSignatures+1)), body: body, wantReason: ReasonTooManySignatures},
		{name: "16 v1 entries, last valid", h: hdr("Stripe-Signature", "t="+now+strings.Repeat(",v1="+strings.Repeat("0", 64), MaxSignatures-1)+","+v1), body: body, want: want},
		{name: "too many ignored entries", h: hdr("Stripe-Signature", good+strings.Repeat(",v0=1", maxEntries)), body: body, wantReason: ReasonTooManySignatures},
		{name: "conflicting duplicate headers", h: hdr("Stripe-Signature", good, "Stripe-Signature", stripeHeader(now, body, otherSecret)), body: body, wantReason: ReasonDuplicateHeader},
		{name: "identical duplicate headers", h: hdr("Stripe-Signature", good, "Stripe-Signature", good), body: body, want: want},
	})
}

func TestStripeToleranceAndRotation(t *testing.T) {
	body := `{"id":"evt_2"}`
	v := mustNew(t, Config{Scheme: SchemeStripe, Secrets: []string{otherSecret, stripeSecret}, Tolerance: 10 * time.Second})
	runCases(t, v, []reqCase{
		{name: "new secret", h: hdr("Stripe-Signature", stripeHeader(ts(0), body, stripeSecret)), body: body, want: Result{DeliveryID: "evt_2"}},
		{name: "old secret", h: hdr("Stripe-Signature", stripeHeader(ts(0), body, otherSecret)), body: body, want: Result{DeliveryID: "evt_2"}},
		{name: "within custom tolerance", h: hdr("Stripe-Signature", stripeHeader(ts(-10*time.Second), body, stripeSecret)), body: body, want: Result{DeliveryID: "evt_2"}},
		{name: "beyond custom tolerance", h: hdr("Stripe-Signature", stripeHeader(ts(-11*time.Second), body, stripeSecret)), body: body, wantReason: ReasonStaleTimestamp},
		{name: "future beyond custom tolerance", h: hdr("Stripe-Signature", stripeHeader(ts(11*time.Second), body, stripeSecret)), body: body, wantReason: ReasonStaleTimestamp},
	})
}
