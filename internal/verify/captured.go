package verify

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// maxCapturedLen bounds a secret handed over by a handshake.
const maxCapturedLen = 256

// capturedScheme is an HMAC scheme whose secret a handshake hands over
// (Asana's X-Hook-Secret, Notion's verification_token): configured as
// `secret`, or kept in `secret_file`, written once by the first handshake
// while the file does not exist.
type capturedScheme struct {
	spec macSpec
	b    *builder
	path string // "" when the secret is configured

	mu  sync.Mutex // serialises captures
	cur atomic.Pointer[capturedKey]
}

// capturedKey is the secret in force and its scheme.
type capturedKey struct {
	secret string
	mac    *macScheme
}

// capturedProvider builds a provider whose secret a handshake hands over.
func capturedProvider(spec macSpec) func(b *builder) (scheme, error) {
	return func(b *builder) (scheme, error) {
		hasSecret, hasFile := len(b.cfg.Secrets) > 0, b.cfg.SecretFile != ""
		switch {
		case hasSecret && hasFile:
			return nil, errors.New("secret and secret_file: set one, not both")
		case !hasSecret && !hasFile:
			return nil, fmt.Errorf("secret or secret_file: one is required (%s hands its secret over in a handshake: secret_file keeps it)", b.p.Title)
		}
		s := &capturedScheme{spec: spec, b: b, path: b.cfg.SecretFile}
		if hasSecret {
			if len(b.cfg.Secrets) != 1 {
				return nil, errors.New("secrets: exactly one (the handshake hands over one secret)")
			}
			k, err := s.key(b.cfg.Secrets[0])
			if err != nil {
				return nil, err
			}
			s.cur.Store(k)
			return s, nil
		}
		data, err := os.ReadFile(s.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return s, nil // the handshake will write it
		case err != nil:
			return nil, fmt.Errorf("secret_file: %v", unwrapPathErr(err))
		}
		k, err := s.key(strings.TrimSpace(string(data)))
		if err != nil {
			return nil, fmt.Errorf("secret_file: %s: %v", s.path, err)
		}
		s.cur.Store(k)
		return s, nil
	}
}

// key builds the scheme for secret.
func (s *capturedScheme) key(secret string) (*capturedKey, error) {
	b := *s.b
	b.cfg.Secrets = []string{secret}
	m, err := b.macScheme(s.spec)
	if err != nil {
		return nil, err
	}
	return &capturedKey{secret: secret, mac: m}, nil
}

// offered implements offerer.
func (s *capturedScheme) offered() []string { return s.spec.headers }

// verify implements scheme.
func (s *capturedScheme) verify(c *call) error {
	k := s.cur.Load()
	if k == nil {
		return fail(ReasonNoSecretYet, s.spec.headers[0])
	}
	return k.mac.verify(c)
}

// capture answers a handshake handing over secret: accepted when it is
// the secret in force, or when none is and secret_file can be written
// (first writer wins, mode 0600). It reports whether the handshake is
// accepted.
func (s *capturedScheme) capture(secret string) bool {
	secret = strings.TrimSpace(secret)
	if len(secret) < MinSecretLen || len(secret) > maxCapturedLen || cleanChallenge(secret) != secret {
		return false
	}
	if k := s.cur.Load(); k != nil {
		return subtle.ConstantTimeCompare([]byte(k.secret), []byte(secret)) == 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.cur.Load(); k != nil {
		return subtle.ConstantTimeCompare([]byte(k.secret), []byte(secret)) == 1
	}
	k, err := s.key(secret)
	if err != nil {
		return false
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false // written by another process: a reload reads it
	}
	_, werr := f.WriteString(secret + "\n")
	if cerr := f.Close(); werr != nil || cerr != nil {
		os.Remove(s.path)
		return false
	}
	s.cur.Store(k)
	return true
}

// capturedOf returns the capturedScheme inside s.
func capturedOf(s scheme) *capturedScheme {
	c, _ := unwrap(s).(*capturedScheme)
	return c
}
