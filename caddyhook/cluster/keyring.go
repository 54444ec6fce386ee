package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"sync"

	"github.com/caddyhook/caddyhook/internal/secret"
)

// The engine is shared infrastructure, not a trusted peer: every record a
// node writes to it (a queued event, a dead letter, an idempotency
// record, a lock, a failure broadcast) is sealed with a key that only the
// nodes hold, and every record a node reads is opened with it. A record
// that does not open (unsigned, signed with another key, changed, or
// moved to another subject or key) is dropped, counted and logged.

// TagSize is the length of the seal a Keyring appends (HMAC-SHA256).
const TagSize = sha256.Size

// Signing key rules.
const (
	// MaxSigningKeys bounds the keys of one keyring (each one more HMAC
	// for a record that opens with none of them).
	MaxSigningKeys = 4
)

// sealDomain separates this seal from any other use of the keys.
const sealDomain = "caddyhook-cluster-seal-v1\x00"

// Keyring seals records with its first key and opens records sealed with
// any of its keys, so that a key can be rotated without a moment in which
// two nodes disagree: add the new key after the old one everywhere, then
// put it first everywhere, then remove the old one.
type Keyring struct {
	keys []*ringKey
	fp   string
}

// ringKey is one key with its pool of HMAC states (an HMAC-SHA256 keyed
// once and Reset per use: no allocation per record).
type ringKey struct {
	pool sync.Pool
}

// macState is a keyed HMAC and a scratch buffer for the framing.
type macState struct {
	mac hash.Hash
	buf []byte
}

func (k *ringKey) get() *macState { return k.pool.Get().(*macState) }

// NewKeyring checks keys (the first seals, all open) and returns their
// keyring. Errors name the key by its position, never its value.
func NewKeyring(keys []string) (*Keyring, error) {
	switch {
	case len(keys) == 0:
		return nil, errors.New("at least one key is required")
	case len(keys) > MaxSigningKeys:
		return nil, fmt.Errorf("at most %d keys (have %d)", MaxSigningKeys, len(keys))
	}
	kr := &Keyring{}
	fp := sha256.New()
	fp.Write([]byte(sealDomain + "fingerprint"))
	for i, k := range keys {
		name := "key"
		if len(keys) > 1 {
			name = fmt.Sprintf("key %d of %d", i+1, len(keys))
		}
		if err := secret.CheckStrength(k); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for j := range i {
			if hmac.Equal([]byte(k), []byte(keys[j])) {
				return nil, fmt.Errorf("%s: the same as key %d; every key must be different", name, j+1)
			}
		}
		key := []byte(k)
		rk := &ringKey{}
		rk.pool.New = func() any { return &macState{mac: hmac.New(sha256.New, key), buf: make([]byte, 0, 256)} }
		kr.keys = append(kr.keys, rk)
		fp.Write(binary.AppendUvarint(nil, uint64(len(k))))
		fp.Write(key)
	}
	kr.fp = hex.EncodeToString(fp.Sum(nil)[:16])
	return kr, nil
}

// Fingerprint identifies the keys (for telling configurations apart; it
// reveals nothing about them).
func (kr *Keyring) Fingerprint() string { return kr.fp }

// Seal appends to payload (as append does) the tag of payload under the
// first key, bound to context: the record's kind, subject or key, so that
// a sealed record cannot be moved to another place.
func (kr *Keyring) Seal(payload []byte, context ...string) []byte {
	k := kr.keys[0]
	st := k.get()
	st.sum(payload, context)
	out := st.mac.Sum(payload)
	k.pool.Put(st)
	return out
}

// Open checks the tag at the end of sealed against every key and returns
// the payload (aliasing sealed) when one of them made it for context.
func (kr *Keyring) Open(sealed []byte, context ...string) ([]byte, bool) {
	if kr == nil || len(sealed) < TagSize {
		return nil, false
	}
	payload, tag := sealed[:len(sealed)-TagSize], sealed[len(sealed)-TagSize:]
	for _, k := range kr.keys {
		st := k.get()
		st.sum(payload, context)
		st.buf = st.mac.Sum(st.buf[:0])
		ok := hmac.Equal(st.buf, tag)
		k.pool.Put(st)
		if ok {
			return payload, true
		}
	}
	return nil, false
}

// sum feeds the domain, the length-prefixed context and the payload.
func (st *macState) sum(payload []byte, context []string) {
	st.mac.Reset()
	b := append(st.buf[:0], sealDomain...)
	for _, c := range context {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	b = binary.AppendUvarint(b, uint64(len(payload)))
	st.mac.Write(b)
	st.mac.Write(payload)
	st.buf = b[:0]
}
