package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"hash"
	"sync"
)

// algorithm is an HMAC hash function.
type algorithm struct {
	name string
	new  func() hash.Hash
	size int
}

// Supported algorithms.
var (
	algSHA1   = algorithm{"sha1", sha1.New, sha1.Size}
	algSHA256 = algorithm{"sha256", sha256.New, sha256.Size}
	algSHA512 = algorithm{"sha512", sha512.New, sha512.Size}
)

// macSet computes HMACs under every configured key. Each key has a pool of
// keyed hashes, so a request costs no key schedule and few allocations.
type macSet struct {
	size  int
	pools []*sync.Pool
}

// newMACSet prepares the keyed hashes of alg for keys.
func newMACSet(alg algorithm, keys [][]byte) *macSet {
	m := &macSet{size: alg.size, pools: make([]*sync.Pool, len(keys))}
	for i, key := range keys {
		m.pools[i] = &sync.Pool{New: func() any { return hmac.New(alg.new, key) }}
	}
	return m
}

// match reports whether some candidate in c equals the HMAC of the
// concatenated parts under some key. Every key's MAC is computed and
// compared with every candidate in constant time, with no early exit, so
// timing reveals neither how close a candidate came nor which key matched.
func (m *macSet) match(c *candidates, parts ...[]byte) bool {
	var buf [sha512.Size]byte
	found := 0
	for _, p := range m.pools {
		h := p.Get().(hash.Hash)
		h.Reset()
		for _, part := range parts {
			h.Write(part)
		}
		mac := h.Sum(buf[:0])
		p.Put(h)
		for i := range c.n {
			found |= subtle.ConstantTimeCompare(mac, c.sig[i][:m.size])
		}
	}
	return found == 1
}

// sum appends to dst the HMAC of the concatenated parts under key i (a
// handshake's answer, computed with the first configured secret).
func (m *macSet) sum(i int, dst []byte, parts ...[]byte) []byte {
	p := m.pools[i]
	h := p.Get().(hash.Hash)
	h.Reset()
	for _, part := range parts {
		h.Write(part)
	}
	dst = h.Sum(dst)
	p.Put(h)
	return dst
}
