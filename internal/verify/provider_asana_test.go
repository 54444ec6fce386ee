package verify

import (
	"path/filepath"
	"testing"
)

const (
	asanaSecret = "b537207f20cbfa02357cf448134da559"
	asanaBody   = `{"events":[{"action":"changed","resource":{"gid":"1337","resource_type":"task"},"user":{"gid":"1123"}}]}`
)

var _ = providerTest("asana", providerTests{
	vectors: []vector{{
		name:   "task changed",
		source: "computed from https://developers.asana.com/docs/webhooks-guide#security: hex HMAC-SHA256 of the body under the handshake's secret",
		cfg:    Config{Scheme: "asana", Secrets: []string{asanaSecret}},
		req:    post(asanaBody, "X-Hook-Signature", hexMAC(sha256H, asanaSecret, asanaBody)),
		now:    testNow,
		want:   Result{DeliveryID: sha256Hex(hexMAC(sha256H, asanaSecret, asanaBody)), Event: "task.changed"},
	}},
	handshakes: []handshakeCase{{
		name:   "X-Hook-Secret echoed",
		source: "computed from https://developers.asana.com/docs/webhooks-guide#the-webhook-handshake: answer 200 with the same X-Hook-Secret",
		req:    post("", "X-Hook-Secret", asanaSecret),
		status: 200, header: [2]string{"X-Hook-Secret", asanaSecret},
	}, {
		name:     "another secret",
		req:      post("", "X-Hook-Secret", "0000000000000000000000000000dead"),
		wantFail: ReasonBadHandshake,
	}},
	strip: func(r *Request) { r.Header.Del("X-Hook-Signature") },
})

// TestAsanaSecretFile: the first handshake's X-Hook-Secret is kept.
func TestAsanaSecretFile(t *testing.T) {
	v := mustNew(t, Config{Scheme: "asana", SecretFile: filepath.Join(t.TempDir(), "asana.secret")})
	a, err := v.Handshake(post("", "X-Hook-Secret", asanaSecret)(), testNow)
	if err != nil || a.Header.Get("X-Hook-Secret") != asanaSecret {
		t.Fatalf("handshake: %+v, %v", a, err)
	}
	if _, err := v.VerifyRequest(post(asanaBody, "X-Hook-Signature", hexMAC(sha256H, asanaSecret, asanaBody))(), testNow); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Handshake(post("", "X-Hook-Secret", "short")(), testNow); err == nil {
		t.Fatal("a malformed secret accepted")
	}
}
