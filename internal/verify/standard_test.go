package verify

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

func TestStandard(t *testing.T) {
	body := `{"type":"user.created","data":{"id":"u_1"}}`
	id, now := "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", ts(0)
	good := standardSig(t, standardSecret, id, now, body)
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another-key-of-24-bytes!"))
	raw := mac(sha256.New, standardKey(t, standardSecret), id, ".", now, ".", body)
	want := Result{DeliveryID: id}
	if !strings.ContainsAny(good, "+/") {
		t.Fatal("fixture: the signature must contain + or / for the url-safe case")
	}
	std := func(sig string, extra ...string) []string {
		return append([]string{"webhook-id", id, "webhook-timestamp", now, "webhook-signature", sig}, extra...)
	}
	v := mustNew(t, Config{Scheme: SchemeStandard, Secrets: []string{standardSecret}})
	runCases(t, v, []reqCase{
		{name: "valid", h: hdr(std(good)...), body: body, want: want},
		{name: "svix headers", h: hdr("svix-id", id, "svix-timestamp", now, "svix-signature", good), body: body, want: want},
		{name: "both families, webhook used", h: hdr(std(good, "svix-id", "x", "svix-signature", "v1,AAAA")...), body: body, want: want},
		{name: "families never mixed", h: hdr("webhook-id", id, "svix-timestamp", now, "svix-signature", good), body: body, wantReason: ReasonMissingSignature, wantHeader: "Webhook-Signature"},
		{name: "several entries, last valid", h: hdr(std(standardSig(t, other, id, now, body) + " " + good)...), body: body, want: want},
		{name: "asymmetric entry skipped", h: hdr(std("v1a," + base64.StdEncoding.EncodeToString(make([]byte, 64)) + " " + good)...), body: body, want: want},
		{name: "extra spaces", h: hdr(std("  " + good + "   ")...), body: body, want: want},
		{name: "only v1a", h: hdr(std("v1a,abcd")...), body: body, wantReason: ReasonUnsupportedVersion},
		{name: "only v2", h: hdr(std("v2," + good[3:])...), body: body, wantReason: ReasonUnsupportedVersion},
		{name: "entry without comma", h: hdr(std(good + " v1")...), body: body, wantReason: ReasonMalformedSignature},
		{name: "empty version", h: hdr(std("," + good[3:])...), body: body, wantReason: ReasonMalformedSignature},
		{name: "hex instead of base64", h: hdr(std("v1," + hex.EncodeToString(raw))...), body: body, wantReason: ReasonMalformedSignature},
		{name: "unpadded base64", h: hdr(std("v1," + base64.RawStdEncoding.EncodeToString(raw))...), body: body, wantReason: ReasonMalformedSignature},
		{name: "url-safe base64", h: hdr(std("v1," + strings.NewReplacer("+", "-", "/", "_").Replace(good[3:]))...), body: body, wantReason: ReasonMalformedSignature},
		{name: "truncated", h: hdr(std("v1," + base64.StdEncoding.EncodeToString(raw[:31]))...), body: body, wantReason: ReasonMalformedSignature},
		{name: "wrong secret", h: hdr(std(standardSig(t, other, id, now, body))...), body: body, wantReason: ReasonBadSignature},
		{name: "raw secret used as key", h: hdr(std("v1," + base64.StdEncoding.EncodeToString(mac(sha256.New, []byte(standardSecret), id, ".", now, ".", body)))...), body: body, wantReason: ReasonBadSignature},
		{name: "tampered body", h: hdr(std(good)...), body: body + " ", wantReason: ReasonBadSignature},
		{name: "id changed", h: hdr("webhook-id", id+"x", "webhook-timestamp", now, "webhook-signature", good), body: body, wantReason: ReasonBadSignature},
		{name: "timestamp changed", h: hdr("webhook-id", id, "webhook-timestamp", ts(time.Second), "webhook-signature", good), body: body, wantReason: ReasonBadSignature},
		{name: "stale", h: hdr("webhook-id", id, "webhook-timestamp", ts(-301*time.Second), "webhook-signature", standardSig(t, standardSecret, id, ts(-301*time.Second), body)), body: body, wantReason: ReasonStaleTimestamp},
		{name: "future", h: hdr("webhook-id", id, "webhook-timestamp", ts(301*time.Second), "webhook-signature", standardSig(t, standardSecret, id, ts(301*time.Second), body)), body: body, wantReason: ReasonStaleTimestamp},
		{name: "missing signature", h: hdr("webhook-id", id, "webhook-timestamp", now), body: body, wantReason: ReasonMissingSignature},
		{name: "missing id", h: hdr("webhook-timestamp", now, "webhook-signature", good), body: body, wantReason: ReasonMissingID, wantHeader: "Webhook-Id"},
		{name: "missing timestamp", h: hdr("webhook-id", id, "webhook-signature", good), body: body, wantReason: ReasonMissingTimestamp, wantHeader: "Webhook-Timestamp"},
		{name: "conflicting duplicate signatures", h: hdr(std(good, "webhook-signature", standardSig(t, other, id, now, body))...), body: body, wantReason: ReasonDuplicateHeader},
		{name: "conflicting duplicate ids", h: hdr(std(good, "webhook-id", "msg_other")...), body: body, wantReason: ReasonDuplicateHeader, wantHeader: "Webhook-Id"},
		{name: "17 v1 entries", h: hdr(std(strings.Repeat(good+" ", MaxSignatures+1))...), body: body, wantReason: ReasonTooManySignatures},
		{name: "too many skipped entries", h: hdr(std(good + strings.Repeat(" v1a,x", maxEntries))...), body: body, wantReason: ReasonTooManySignatures},
	})
}

func TestStandardRotationAndDeliveryID(t *testing.T) {
	body := "{}"
	old := "whsec_" + base64.StdEncoding.EncodeToString([]byte("old-rotation-key-32-bytes-long!!"))
	v := mustNew(t, Config{Scheme: SchemeStandard, Secrets: []string{old, standardSecret}, Tolerance: time.Minute})
	long := strings.Repeat("m", MaxDeliveryIDLen+1)
	runCases(t, v, []reqCase{
		{name: "old key", h: hdr("webhook-id", "m1", "webhook-timestamp", ts(0), "webhook-signature", standardSig(t, old, "m1", ts(0), body)), body: body, want: Result{DeliveryID: "m1"}},
		{name: "new key", h: hdr("webhook-id", "m1", "webhook-timestamp", ts(0), "webhook-signature", standardSig(t, standardSecret, "m1", ts(0), body)), body: body, want: Result{DeliveryID: "m1"}},
		{name: "both keys signed", h: hdr("webhook-id", "m1", "webhook-timestamp", ts(0), "webhook-signature", standardSig(t, old, "m1", ts(0), body)+" "+standardSig(t, standardSecret, "m1", ts(0), body)), body: body, want: Result{DeliveryID: "m1"}},
		{name: "custom tolerance", h: hdr("webhook-id", "m1", "webhook-timestamp", ts(-61*time.Second), "webhook-signature", standardSig(t, old, "m1", ts(-61*time.Second), body)), body: body, wantReason: ReasonStaleTimestamp},
		{name: "overlong signed id verifies but is not returned", h: hdr("webhook-id", long, "webhook-timestamp", ts(0), "webhook-signature", standardSig(t, old, long, ts(0), body)), body: body, want: Result{}},
	})
}
