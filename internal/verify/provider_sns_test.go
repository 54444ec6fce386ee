package verify

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	snsTopic     = "arn:aws:sns:us-west-2:123456789012:MyTopic"
	snsCertURL   = "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem"
	snsSubscribe = "https://sns.us-west-2.amazonaws.com/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-west-2:123456789012:MyTopic&Token=2336412f37"
)

// snsCertPEM is a self-signed certificate of the first test RSA key.
var snsCertPEM = sync.OnceValue(func() string {
	k, _ := testRSA()
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<33, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
})

// snsSigned builds a signed SNS message of typ with key (version 1 or 2).
func snsSigned(key *rsa.PrivateKey, version, typ, message string, extra map[string]string) string {
	m := map[string]string{"Type": typ, "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", "TopicArn": snsTopic,
		"Message": message, "Timestamp": testNow.UTC().Format("2006-01-02T15:04:05.000Z"), "SignatureVersion": version,
		"SigningCertURL": snsCertURL}
	for k, v := range extra {
		m[k] = v
	}
	keys := []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	if typ != "Notification" {
		keys = []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	}
	var b strings.Builder
	for _, k := range keys {
		if v, ok := m[k]; ok {
			b.WriteString(k + "\n" + v + "\n")
		}
	}
	var sig []byte
	var err error
	if version == "1" {
		d := sha1.Sum([]byte(b.String()))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA1, d[:])
	} else {
		d := sha256.Sum256([]byte(b.String()))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	}
	if err != nil {
		panic(err)
	}
	m["Signature"] = base64.StdEncoding.EncodeToString(sig)
	out, _ := json.Marshal(m)
	return string(out)
}

// snsEnv serves the certificate and the confirmation URL.
func snsEnv(t *testing.T) Env {
	c, _ := newStub(map[string]string{snsCertURL: snsCertPEM(), snsSubscribe: "<ConfirmSubscriptionResponse/>"})
	return Env{HTTPClient: c}
}

// snsKey is the first test RSA key.
func snsKey() *rsa.PrivateKey { k, _ := testRSA(); return k }

var snsCfg = Config{Scheme: "sns", Topics: []string{snsTopic}}

var _ = providerTest("sns", providerTests{
	vectors: []vector{{
		name:   "notification, SignatureVersion 2",
		source: "computed from https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html: RSA SHA256 over the canonical notification string, under a test certificate served for the allow-listed URL",
		cfg:    snsCfg,
		req: func() *Request {
			return post(snsSigned(snsKey(), "2", "Notification", `{"alarm":"disk full"}`, map[string]string{"Subject": "CloudWatch alarm"}))()
		},
		now:  testNow,
		want: Result{DeliveryID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", Event: "CloudWatch alarm"},
	}, {
		name:   "notification, SignatureVersion 1, no subject",
		source: "computed from https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html: RSA SHA1 over the canonical notification string",
		cfg:    snsCfg,
		req:    func() *Request { return post(snsSigned(snsKey(), "1", "Notification", "hello", nil))() },
		now:    testNow,
		want:   Result{DeliveryID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", Event: "Notification"},
	}},
	handshakes: []handshakeCase{{
		name:   "SubscriptionConfirmation",
		source: "computed from https://docs.aws.amazon.com/sns/latest/dg/SendMessageToHttp.confirm.html: a signed confirmation, confirmed by a GET of SubscribeURL",
		req: func() *Request {
			return post(snsSigned(snsKey(), "2", "SubscriptionConfirmation", "You have chosen to subscribe", map[string]string{"SubscribeURL": snsSubscribe, "Token": "2336412f37"}))()
		},
		status: 200,
	}, {
		name: "UnsubscribeConfirmation",
		req: func() *Request {
			return post(snsSigned(snsKey(), "2", "UnsubscribeConfirmation", "unsubscribed", map[string]string{"SubscribeURL": snsSubscribe, "Token": "2336412f37"}))()
		},
		status: 200,
	}, {
		name: "SubscribeURL outside the allow-list",
		req: func() *Request {
			return post(snsSigned(snsKey(), "2", "SubscriptionConfirmation", "x", map[string]string{"SubscribeURL": "https://evil.example.com/confirm", "Token": "t"}))()
		},
		wantFail: ReasonCertificateURL,
	}, {
		name: "confirmation from another topic",
		req: func() *Request {
			return post(snsSigned(snsKey(), "2", "SubscriptionConfirmation", "x", map[string]string{"SubscribeURL": snsSubscribe, "Token": "t", "TopicArn": "arn:aws:sns:us-west-2:999999999999:Theirs"}))()
		},
		wantFail: ReasonUnknownTopic,
	}},
	env:    snsEnv,
	tamper: func(r *Request) { r.Body = []byte(strings.Replace(string(r.Body), "disk full", "disk fine", 1)) },
	strip:  func(r *Request) { r.Body = []byte(strings.Replace(string(r.Body), `"Signature":"`, `"Unsigned":"`, 1)) },
	wrong: func(_ *testing.T, cfg Config) Config {
		cfg.Topics = []string{"arn:aws:sns:us-west-2:999999999999:Theirs"}
		return cfg
	},
})

// TestSNSRefusals: a certificate URL outside the allow-list, another key,
// an unreachable certificate (503, not 401), the certificate cached.
func TestSNSRefusals(t *testing.T) {
	client, stub := newStub(map[string]string{snsCertURL: snsCertPEM()})
	v, err := NewWithEnv(snsCfg, Env{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	_, other := testRSA()
	for name, tc := range map[string]struct {
		body   string
		reason string
	}{
		"certificate outside the allow-list": {strings.Replace(snsSigned(snsKey(), "2", "Notification", "x", nil), snsCertURL, "https://evil.example.com/cert.pem", 1), ReasonCertificateURL},
		"certificate over http":              {strings.Replace(snsSigned(snsKey(), "2", "Notification", "x", nil), "https://sns.", "http://sns.", 1), ReasonCertificateURL},
		"look-alike host":                    {strings.Replace(snsSigned(snsKey(), "2", "Notification", "x", nil), "amazonaws.com/", "amazonaws.com.evil.example/", 1), ReasonCertificateURL},
		"signed by another key":              {snsSigned(other, "2", "Notification", "x", nil), ReasonBadSignature},
		"unknown signature version":          {snsSigned(snsKey(), "3", "Notification", "x", nil), ReasonUnsupportedVersion},
		"not JSON":                           {"Type=Notification", ReasonMalformedBody},
	} {
		_, err := v.VerifyRequest(post(tc.body)(), testNow)
		var ve *Error
		if !errors.As(err, &ve) || ve.Reason != tc.reason {
			t.Errorf("%s: %v, want %s", name, err, tc.reason)
		}
	}
	for range 3 {
		if _, err := v.VerifyRequest(post(snsSigned(snsKey(), "2", "Notification", "x", nil))(), testNow); err != nil {
			t.Fatal(err)
		}
	}
	if n := stub.hitsOf(snsCertURL); n != 1 {
		t.Fatalf("certificate fetched %d times, want once (cached)", n)
	}
	missing := strings.Replace(snsSigned(snsKey(), "2", "Notification", "x", nil), "f3ecfb7224c7233fe7bb5f59f96de52f", "00000000000000000000000000000000", 1)
	var ue *UnavailableError
	if _, err := v.VerifyRequest(post(missing)(), testNow); !errors.As(err, &ue) {
		t.Fatalf("unreachable certificate: %v, want *UnavailableError", err)
	}
	if _, err := New(Config{Scheme: "sns"}); err == nil || !strings.Contains(err.Error(), "topic (JSON topics): required") {
		t.Fatalf("no topic: %v", err)
	}
	if _, err := New(Config{Scheme: "sns", Topics: []string{"MyTopic"}}); err == nil || !strings.Contains(err.Error(), "topics[0]") {
		t.Fatalf("bad topic: %v", err)
	}
	if _, err := New(Config{Scheme: "sns", Topics: []string{snsTopic}, CertHosts: []string{"*"}}); err == nil || !strings.Contains(err.Error(), "cert_hosts[0]") {
		t.Fatalf("bad cert_hosts: %v", err)
	}
}
