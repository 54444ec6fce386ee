package verify

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// TestFeishuDecryptPublishedExample decrypts Feishu's documented example.
// Vector from https://open.feishu.cn/document/ukTMukTMukTM/uYDNxYjL2QTM24iN0EjN/event-subscription-configure-/encrypt-key-encryption-configuration-case
func TestFeishuDecryptPublishedExample(t *testing.T) {
	v := mustNew(t, Config{Scheme: "feishu", VerifyToken: "verification-token", EncryptKey: "test key"})
	s := unwrap(v.scheme).(*feishuScheme)
	got, err := s.decrypt("P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=")
	if err != nil || string(got) != "hello world" {
		t.Fatalf("decrypt = %q, %v", got, err)
	}
	for _, bad := range []string{"", "AAAA", "P37w+VZImNgPEO1RBhJ6Rt==", strings.Repeat("A", 64)} {
		if _, err := s.decrypt(bad); err == nil {
			t.Errorf("decrypt(%q) succeeded", bad)
		}
	}
}

const (
	feishuKey   = "feishu-encrypt-key-01"
	feishuToken = "feishu-verification-token"
	feishuEvent = `{"schema":"2.0","header":{"event_id":"5e3702a84e847582be8db7fb73283c02","event_type":"im.message.receive_v1","token":"` + feishuToken + `","app_id":"cli_a1"},"event":{"sender":{"sender_id":{"open_id":"ou_84aad35d"}},"message":{"content":"{\"text\":\"hello agent\"}"}}}`
)

// feishuEncrypt encrypts plain the Feishu way with a fixed IV.
func feishuEncrypt(key, plain string) string {
	k := sha256.Sum256([]byte(key))
	block, _ := aes.NewCipher(k[:])
	n := aes.BlockSize - len(plain)%aes.BlockSize
	padded := append([]byte(plain), []byte(strings.Repeat(string(rune(n)), n))...)
	iv := []byte("0123456789abcdef")
	out := make([]byte, len(padded))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(out, padded)
	return base64.StdEncoding.EncodeToString(append(iv, out...))
}

// feishuSigned posts {"encrypt"} with the Lark signature.
func feishuSigned(key, plain string) func() *Request {
	body := `{"encrypt":"` + feishuEncrypt(key, plain) + `"}`
	sum := sha256.Sum256([]byte(ts(0) + "816354" + key + body))
	return post(body, "X-Lark-Request-Timestamp", ts(0), "X-Lark-Request-Nonce", "816354", "X-Lark-Signature", hex.EncodeToString(sum[:]))
}

var feishuCfg = Config{Scheme: "feishu", VerifyToken: feishuToken, EncryptKey: feishuKey}

var _ = providerTest("feishu", providerTests{
	vectors: []vector{{
		name:   "encrypted im.message.receive_v1",
		source: "computed from https://open.feishu.cn/document/ukTMukTMukTM/uYDNxYjL2QTM24iN0EjN/event-subscription-configure-/encrypt-key-encryption-configuration-case: AES-256-CBC under SHA-256 of the Encrypt Key, signature hex SHA-256(timestamp+nonce+key+body)",
		cfg:    feishuCfg,
		req:    feishuSigned(feishuKey, feishuEvent),
		now:    testNow,
		want:   Result{DeliveryID: "5e3702a84e847582be8db7fb73283c02", Event: "im.message.receive_v1", Payload: []byte(feishuEvent)},
	}},
	handshakes: []handshakeCase{{
		name:   "encrypted url_verification",
		source: "computed from https://open.feishu.cn/document/ukTMukTMukTM/uYDNxYjL2QTM24iN0EjN/event-subscription-configure-/request-url-configuration-case: answer the decrypted challenge when the token matches",
		req:    post(`{"encrypt":"` + feishuEncrypt(feishuKey, `{"challenge":"ajls384kdjx98XX","token":"`+feishuToken+`","type":"url_verification"}`) + `"}`),
		status: 200, ctype: "application/json", body: `{"challenge":"ajls384kdjx98XX"}`,
	}, {
		name:     "url_verification with another token",
		req:      post(`{"encrypt":"` + feishuEncrypt(feishuKey, `{"challenge":"x","token":"guess","type":"url_verification"}`) + `"}`),
		wantFail: ReasonBadToken,
	}, {
		name:  "encrypted under another key",
		req:   post(`{"encrypt":"` + feishuEncrypt("another-key-0000", `{"challenge":"x","token":"`+feishuToken+`","type":"url_verification"}`) + `"}`),
		notHS: true,
	}},
	wrong: func(_ *testing.T, cfg Config) Config { cfg.EncryptKey = "another-encrypt-key"; return cfg },
})

var _ = providerTest("lark", providerTests{
	vectors: []vector{{
		name:   "encrypted event",
		source: "computed from https://open.larksuite.com/document/ukTMukTMukTM/uYDNxYjL2QTM24iN0EjN/event-subscription-configure-/encrypt-key-encryption-configuration-case: Lark uses Feishu's scheme",
		cfg:    Config{Scheme: "lark", VerifyToken: feishuToken, EncryptKey: feishuKey},
		req:    feishuSigned(feishuKey, feishuEvent),
		now:    testNow,
		want:   Result{DeliveryID: "5e3702a84e847582be8db7fb73283c02", Event: "im.message.receive_v1", Payload: []byte(feishuEvent)},
	}},
	handshakes: []handshakeCase{{
		name:   "plain url_verification",
		source: "computed from https://open.larksuite.com/document/ukTMukTMukTM/uYDNxYjL2QTM24iN0EjN/event-subscription-configure-/request-url-configuration-case: the documented url_verification shape, answered with its challenge",
		cfg:    &Config{Scheme: "lark", VerifyToken: feishuToken},
		req:    post(`{"challenge":"ajls384kdjx98XX","token":"` + feishuToken + `","type":"url_verification"}`),
		status: 200, ctype: "application/json", body: `{"challenge":"ajls384kdjx98XX"}`,
	}},
	wrong: func(_ *testing.T, cfg Config) Config { cfg.EncryptKey = "another-encrypt-key"; return cfg },
})
