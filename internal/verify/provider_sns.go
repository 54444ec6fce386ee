package verify

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// snsHost matches the hosts Amazon SNS serves signing certificates and
// subscription confirmations from.
var snsHost = regexp.MustCompile(`^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$`)

// snsHosts is SNS's default allow-list.
var snsHosts = hostList{match: snsHost.MatchString, desc: "sns.<region>.amazonaws.com[.cn]"}

// snsCertTTL is how long a signing certificate is kept.
const snsCertTTL = 24 * time.Hour

// snsMessage is an SNS HTTP(S) message.
type snsMessage struct {
	Type             string  `json:"Type"`
	MessageID        string  `json:"MessageId"`
	Token            string  `json:"Token"`
	TopicArn         string  `json:"TopicArn"`
	Subject          *string `json:"Subject"`
	Message          string  `json:"Message"`
	SubscribeURL     string  `json:"SubscribeURL"`
	Timestamp        string  `json:"Timestamp"`
	SignatureVersion string  `json:"SignatureVersion"`
	Signature        string  `json:"Signature"`
	SigningCertURL   string  `json:"SigningCertURL"`
}

// snsScheme verifies SNS messages: the topic is allow-listed, the signing
// certificate comes from an allow-listed https host (cached), and its RSA
// key signed the message's canonical string (SHA1 for SignatureVersion 1,
// SHA256 for 2).
type snsScheme struct {
	topics []string
	hosts  hostList
	certs  *fetcher
	client *http.Client
	tol    time.Duration
}

func init() {
	register(&Provider{
		Name:       "sns",
		Title:      "Amazon SNS",
		Family:     FamilyX509,
		JSONTypes:  []string{"text/plain"}, // SNS posts its JSON as text/plain; charset=UTF-8
		Signature:  "Signature: base64 RSA (SignatureVersion 1: SHA1, 2: SHA256) of the canonical message, under the certificate at SigningCertURL",
		Doc:        "https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html",
		Notes:      "topic lists the accepted topic ARNs (required: a valid signature only proves the message came from some SNS topic). Certificates are fetched only over https from sns.<region>.amazonaws.com (cert_hosts replaces the list), at most 64 KiB, within 10 s, and kept 24 h. A SubscriptionConfirmation from an accepted topic is confirmed by the edge (a GET of SubscribeURL on the same allow-list) and never dispatched; an UnsubscribeConfirmation is answered 200.",
		Handshake:  "SubscriptionConfirmation (signed, accepted topic) → the edge GETs SubscribeURL, answers 200; UnsubscribeConfirmation → 200",
		DeliveryID: oneOf(fromJSON("MessageId")),
		Event:      oneOf(fromJSON("Subject"), fromJSON("Type")),
		Template:   "Amazon SNS {{event}} on {{payload.TopicArn}}: {{payload.Message}}",
		Tolerance:  time.Hour,
		Words:      []string{"topic", "cert_hosts"},
		Required:   []string{"topic"},
		SignsBody:  true,
		build:      newSNS,
	})
}

// newSNS builds an snsScheme.
func newSNS(b *builder) (scheme, error) {
	s := &snsScheme{client: b.httpClient()}
	for i, t := range b.cfg.Topics {
		if !strings.HasPrefix(t, "arn:aws") || strings.Count(t, ":") != 5 {
			return nil, fmt.Errorf("topics[%d]: %q is not a topic ARN (arn:aws:sns:<region>:<account>:<name>)", i, t)
		}
		s.topics = append(s.topics, t)
	}
	var err error
	if s.hosts, err = b.hostsFor(snsHosts); err != nil {
		return nil, err
	}
	if s.tol, err = b.tolerance(); err != nil {
		return nil, err
	}
	s.certs = newFetcher(s.client, s.hosts, snsCertTTL, parseSNSCert)
	return s, nil
}

// parseSNSCert parses a PEM certificate holding an RSA key.
func parseSNSCert(b []byte) (any, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, errors.New("certificate does not parse")
	}
	k, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("certificate key is not RSA")
	}
	return k, nil
}

// read decodes and authenticates the message; it fails with an *Error or
// an *UnavailableError.
func (s *snsScheme) read(c *call) (*snsMessage, error) {
	var m snsMessage
	if err := json.Unmarshal(c.body(), &m); err != nil {
		return nil, fail(ReasonMalformedBody, "")
	}
	if m.Signature == "" {
		return nil, fail(ReasonMissingSignature, "")
	}
	if !slices.Contains(s.topics, m.TopicArn) {
		return nil, fail(ReasonUnknownTopic, "")
	}
	var fields []string
	switch m.Type {
	case "Notification":
		fields = []string{"Message", m.Message, "MessageId", m.MessageID}
		if m.Subject != nil {
			fields = append(fields, "Subject", *m.Subject)
		}
		fields = append(fields, "Timestamp", m.Timestamp, "TopicArn", m.TopicArn, "Type", m.Type)
	case "SubscriptionConfirmation", "UnsubscribeConfirmation":
		fields = []string{"Message", m.Message, "MessageId", m.MessageID, "SubscribeURL", m.SubscribeURL,
			"Timestamp", m.Timestamp, "Token", m.Token, "TopicArn", m.TopicArn, "Type", m.Type}
	default:
		return nil, fail(ReasonMalformedBody, "")
	}
	var (
		h   crypto.Hash
		sum []byte
	)
	canon := []byte(strings.Join(fields, "\n") + "\n")
	switch m.SignatureVersion {
	case "1":
		d := sha1.Sum(canon)
		h, sum = crypto.SHA1, d[:]
	case "2":
		d := sha256.Sum256(canon)
		h, sum = crypto.SHA256, d[:]
	default:
		return nil, fail(ReasonUnsupportedVersion, "")
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil || len(sig) > 1024 {
		return nil, fail(ReasonMalformedSignature, "")
	}
	if _, err := checkFetchURL(m.SigningCertURL, s.hosts); err != nil || !strings.HasSuffix(m.SigningCertURL, ".pem") {
		return nil, fail(ReasonCertificateURL, "")
	}
	if err := checkTime(m.Timestamp, "", unitRFC3339, c.now, s.tol); err != nil {
		return nil, err
	}
	k, err := s.certs.get(c.r.ctx(), m.SigningCertURL, c.now, false)
	if err != nil {
		return nil, &UnavailableError{Reason: "SNS signing certificate: " + err.Error()}
	}
	if rsa.VerifyPKCS1v15(k.(*rsa.PublicKey), h, sum, sig) != nil {
		return nil, fail(ReasonBadSignature, "")
	}
	return &m, nil
}

// verify implements scheme: only notifications are dispatched.
func (s *snsScheme) verify(c *call) error {
	m, err := s.read(c)
	if err != nil {
		return err
	}
	if m.Type != "Notification" {
		return fail(ReasonMalformedBody, "") // a confirmation reaching dispatch
	}
	return nil
}

// handshake implements handshaker: confirmations are answered, never
// dispatched; a subscription is confirmed by fetching SubscribeURL.
func (s *snsScheme) handshake(c *call) (*Answer, error) {
	if !isPost(c) {
		return nil, errNotHandshake
	}
	t := jsonField(c.body(), "Type")
	if t != "SubscriptionConfirmation" && t != "UnsubscribeConfirmation" {
		return nil, errNotHandshake
	}
	m, err := s.read(c)
	if err != nil {
		return nil, err
	}
	if m.Type == "UnsubscribeConfirmation" {
		return emptyAnswer("sns unsubscribe confirmation", http.StatusOK), nil
	}
	if _, err := checkFetchURL(m.SubscribeURL, s.hosts); err != nil {
		return nil, fail(ReasonCertificateURL, "")
	}
	if _, err := fetchBounded(c.r.ctx(), s.client, m.SubscribeURL); err != nil {
		return nil, &UnavailableError{Reason: "SNS subscription confirmation: " + err.Error()}
	}
	return emptyAnswer("sns subscription confirmed", http.StatusOK), nil
}
