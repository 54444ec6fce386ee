package caddyhook

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math/bits"
	"mime"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddyhook/caddyhook/internal/lockout"
)

// Defaults of unauthenticated_bodies and body_timeout.
const (
	defaultUnauthBodies     = 256
	defaultUnauthTimeout    = 10 * time.Second
	defaultUnauthPerAddress = 8
	// defaultBodyTimeout bounds an authenticated body: twice the reference
	// gateway's 30 s, so that whatever the gateway would read the edge
	// reads too; the default 256 KiB body then needs 4.4 KB/s, below any
	// sender that is not stalling.
	defaultBodyTimeout = 60 * time.Second
)

// A locked address's request that offers a signature header is read only
// when its declared body is at most lockedBodyMax bytes, within
// lockedBodyWait (or the unauthenticated timeout, if shorter), and never
// with one of the unauthenticated_bodies slots (see bodyReads.begin).
const (
	lockedBodyMax  = 64 << 10
	lockedBodyWait = 2 * time.Second
)

// An early answer (one decided before the body is read) keeps the
// connection when a body of at most earlyDrainLimit bytes arrives within
// earlyDrainWait; else it closes it, reading what still comes of the body
// for at most lateBodyGrace (see settleUnreadBody).
const (
	earlyDrainLimit = 64 << 10
	earlyDrainWait  = 20 * time.Millisecond
	lateBodyGrace   = 2 * time.Second
)

// Reasons of the body step.
const (
	reasonContentType = "content type must be application/json"
	reasonTooLarge    = "payload too large"
)

// reasonBodyTimeout answers a body that did not arrive in time (the
// reference gateway's text and status, 408).
const reasonBodyTimeout = "request body timeout"

// reasonTooManyFromAddr answers an unauthenticated read over the per
// address cap.
const reasonTooManyFromAddr = "too many unauthenticated requests in progress from this address"

// reasonTooManyFromNetwork answers an unauthenticated read over the cap of
// one of the client's wider IPv6 networks (per_prefix).
const reasonTooManyFromNetwork = "too many unauthenticated requests in progress from this network"

// defaultPerPrefix are the caps of per_prefix: an IPv6 client's /48 (a
// site's allocation) and /32 (a provider's) each hold at most these many
// unauthenticated reads, so that many /64s of one attacker (a fresh /64
// per connection is cheap) share one cap instead of each having
// per_address reads.
var defaultPerPrefix = []PrefixCap{{Bits: 48, Max: 32}, {Bits: 32, Max: 64}}

// maxPerPrefix bounds the per_prefix caps of one handler.
const maxPerPrefix = 8

// PrefixCap caps the unauthenticated reads in progress of all the IPv6
// clients in one network of a prefix length.
type PrefixCap struct {
	// Bits is the IPv6 prefix length (16 to 127), e.g. 48.
	Bits int `json:"bits"`
	// Max is how many reads all the clients of one such network may have
	// at once (1 to 65536, at most unauthenticated_bodies' max).
	Max int `json:"max"`
}

// UnauthenticatedBodies bounds the request bodies read before the request
// is authenticated: on a hook name that a verify mapping answers, a
// request without the hook token must be read to check its signature.
type UnauthenticatedBodies struct {
	// Max is how many such bodies are read at once (default 256); one
	// more is answered 503 with Retry-After at once.
	Max int `json:"max,omitempty"`
	// Timeout is how long one such body may take to arrive (default 10s);
	// a slower or abandoned body is answered 408 and counts as an
	// authentication failure of its address.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// PerAddress is how many of them one client address (its lockout
	// key: an IPv4 address or an ipv6_prefix network) may have at once
	// (default 8); one more is answered 503 with Retry-After at once.
	PerAddress int `json:"per_address,omitempty"`
	// PerPrefix caps the reads of all the IPv6 clients of one wider
	// network together, for each prefix length given (default: 32 per
	// /48 and 64 per /32; an entry replaces the default of its length):
	// a client of many /64s has its /48's and /32's reads, not
	// per_address reads per /64. One more is answered 503 with
	// Retry-After at once. Caddyfile `per_prefix /48 32`.
	PerPrefix []PrefixCap `json:"per_prefix,omitempty"`
}

// reasonTooManyUnauth answers an unauthenticated read over the shared
// slots.
const reasonTooManyUnauth = "too many unauthenticated requests in progress"

// bodyReads reads request bodies within their bounds: body_timeout for an
// authenticated request; for one a signature must authenticate, the
// handler's allowance of unauthenticated reads: slots for every address
// together, reads in progress per address, and a separate allowance for
// the small reads of locked addresses.
type bodyReads struct {
	slots         chan struct{}
	locked        chan struct{}
	unauthTimeout time.Duration
	perAddr       addrCounts
	perPrefix     []prefixCounts // per_prefix, narrowest first
	timeout       time.Duration  // body_timeout
}

// prefixCounts counts the reads in progress of the IPv6 networks of one
// prefix length.
type prefixCounts struct {
	bits   int
	counts addrCounts
}

// newBodyReads fills the defaults of unauthenticated_bodies (*cfg) and
// body_timeout (*bodyTimeout), checks their ranges and makes the
// allowance.
func newBodyReads(cfg **UnauthenticatedBodies, bodyTimeout *caddy.Duration) (*bodyReads, error) {
	u := UnauthenticatedBodies{Max: defaultUnauthBodies, Timeout: caddy.Duration(defaultUnauthTimeout), PerAddress: defaultUnauthPerAddress}
	if c := *cfg; c != nil {
		if c.Max < 0 || c.Max > 1<<16 {
			return nil, fmt.Errorf("unauthenticated_bodies: %d must be between 1 and 65536", c.Max)
		}
		if c.Timeout < 0 || time.Duration(c.Timeout) > 10*time.Minute {
			return nil, fmt.Errorf("unauthenticated_bodies: timeout %s must be between 1ms and 10m", time.Duration(c.Timeout))
		}
		if c.PerAddress < 0 || c.PerAddress > 1<<16 {
			return nil, fmt.Errorf("unauthenticated_bodies: per_address %d must be between 1 and 65536", c.PerAddress)
		}
		if c.Max > 0 {
			u.Max = c.Max
		}
		if c.Timeout > 0 {
			u.Timeout = c.Timeout
		}
		if c.PerAddress > 0 {
			u.PerAddress = c.PerAddress
		}
		u.PerPrefix = c.PerPrefix
	}
	u.PerAddress = min(u.PerAddress, u.Max)
	perPrefix, err := prefixCaps(u.PerPrefix, u.Max)
	if err != nil {
		return nil, err
	}
	u.PerPrefix = perPrefix
	if *bodyTimeout < 0 || time.Duration(*bodyTimeout) > time.Hour {
		return nil, fmt.Errorf("body_timeout: %s must be between 1ms and 1h", time.Duration(*bodyTimeout))
	}
	if *bodyTimeout == 0 {
		*bodyTimeout = caddy.Duration(defaultBodyTimeout)
	}
	*cfg = &u
	br := &bodyReads{
		slots:         make(chan struct{}, u.Max),
		locked:        make(chan struct{}, u.Max),
		unauthTimeout: time.Duration(u.Timeout),
		perAddr:       newAddrCounts(u.PerAddress),
		timeout:       time.Duration(*bodyTimeout),
	}
	for _, pc := range u.PerPrefix {
		br.perPrefix = append(br.perPrefix, prefixCounts{bits: pc.Bits, counts: newAddrCounts(pc.Max)})
	}
	return br, nil
}

// prefixCaps checks the configured per_prefix caps and merges them with
// the defaults (an entry replaces the default of its length), each at
// most max, narrowest first.
func prefixCaps(configured []PrefixCap, max int) ([]PrefixCap, error) {
	if len(configured) > maxPerPrefix {
		return nil, fmt.Errorf("unauthenticated_bodies: per_prefix: at most %d prefix lengths (have %d)", maxPerPrefix, len(configured))
	}
	out := slices.Clone(defaultPerPrefix)
	for i, pc := range configured {
		switch {
		case pc.Bits < 16 || pc.Bits > 127:
			return nil, fmt.Errorf("unauthenticated_bodies: per_prefix: /%d must be between /16 and /127", pc.Bits)
		case pc.Max < 1 || pc.Max > 1<<16:
			return nil, fmt.Errorf("unauthenticated_bodies: per_prefix /%d: %d must be between 1 and 65536", pc.Bits, pc.Max)
		case slices.ContainsFunc(configured[:i], func(o PrefixCap) bool { return o.Bits == pc.Bits }):
			return nil, fmt.Errorf("unauthenticated_bodies: per_prefix: /%d given twice", pc.Bits)
		}
		if j := slices.IndexFunc(out, func(o PrefixCap) bool { return o.Bits == pc.Bits }); j >= 0 {
			out[j].Max = pc.Max
		} else {
			out = append(out, pc)
		}
	}
	for i := range out {
		out[i].Max = min(out[i].Max, max)
	}
	slices.SortFunc(out, func(a, b PrefixCap) int { return b.Bits - a.Bits })
	return out, nil
}

// settings are the allowance's bounds, as the admin API shows them.
func (u *bodyReads) settings() (slots int, timeout time.Duration, perAddress int, perPrefix []PrefixCap) {
	for _, pc := range u.perPrefix {
		perPrefix = append(perPrefix, PrefixCap{Bits: pc.bits, Max: int(pc.counts.max)})
	}
	return cap(u.slots), u.unauthTimeout, int(u.perAddr.max), perPrefix
}

// begin takes what one unauthenticated read of ex's body needs and sets
// the read deadline of its connection; end gives it back when the read is
// over. An address may have perAddr reads at once, the IPv6 networks it
// is in their perPrefix reads, and all addresses together len(slots). A
// locked address (one that offered a signature) gets none of those
// slots: only a declared body of at most lockedBodyMax bytes is read,
// from a separate allowance, within lockedBodyWait; anything else is its
// 429 at once.
func (u *bodyReads) begin(ex *exchange, key lockout.Key) *hookError {
	pool, wait := u.pool(ex), u.unauthTimeout
	if ex.lockedFor > 0 {
		if ex.r.ContentLength < 0 || ex.r.ContentLength > lockedBodyMax {
			return lockedOut(ex.lockedFor)
		}
		wait = min(wait, lockedBodyWait)
	}
	busy := func(reason string) *hookError {
		if ex.lockedFor > 0 {
			return lockedOut(ex.lockedFor)
		}
		return &hookError{status: http.StatusServiceUnavailable, reason: reason, retryAfter: time.Second}
	}
	if !u.perAddr.take(key) {
		return busy(reasonTooManyFromAddr)
	}
	if !u.takeNetworks(ex.ip) {
		u.perAddr.give(key)
		return busy(reasonTooManyFromNetwork)
	}
	select {
	case pool <- struct{}{}:
	default:
		u.perAddr.give(key)
		u.giveNetworks(ex.ip, len(u.perPrefix))
		return busy(reasonTooManyUnauth)
	}
	if ex.w != nil {
		setReadDeadline(ex.w, ex.now.Add(wait))
	}
	return nil
}

// end gives back what begin took for ex.
func (u *bodyReads) end(ex *exchange, key lockout.Key) {
	<-u.pool(ex)
	u.perAddr.give(key)
	u.giveNetworks(ex.ip, len(u.perPrefix))
}

// takeNetworks counts one more read for each of ip's networks of the
// per_prefix lengths; false (and nothing counted) when one of them has
// its cap already. An IPv4 client is in no such network.
func (u *bodyReads) takeNetworks(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.Is6() {
		return true
	}
	for i := range u.perPrefix {
		if !u.perPrefix[i].counts.take(networkKey(ip, u.perPrefix[i].bits)) {
			u.giveNetworks(ip, i)
			return false
		}
	}
	return true
}

// giveNetworks counts one read less for ip's networks of the first n
// per_prefix lengths.
func (u *bodyReads) giveNetworks(ip netip.Addr, n int) {
	ip = ip.Unmap()
	if !ip.Is6() {
		return
	}
	for i := range n {
		u.perPrefix[i].counts.give(networkKey(ip, u.perPrefix[i].bits))
	}
}

// networkKey is the key of ip's network of the prefix length bits.
func networkKey(ip netip.Addr, bits int) lockout.Key {
	p, _ := ip.Prefix(bits)
	return p.Addr().As16()
}

// pool is the allowance ex's read comes from.
func (u *bodyReads) pool(ex *exchange) chan struct{} {
	if ex.lockedFor > 0 {
		return u.locked
	}
	return u.slots
}

// addrShards splits addrCounts into independently locked parts.
const addrShards = 64

// addrCounts counts reads in progress per lockout key, up to max each. An
// entry exists only while its address has a read in progress, so the
// memory follows the reads, not the addresses ever seen.
type addrCounts struct {
	max    int32
	seed   maphash.Seed
	shards *[addrShards]addrShard
}

// addrShard is one part of addrCounts.
type addrShard struct {
	mu sync.Mutex
	n  map[lockout.Key]int32
	_  [40]byte // keep neighbouring shard mutexes off one cache line
}

// newAddrCounts returns an empty count with a cap of max per key.
func newAddrCounts(max int) addrCounts {
	c := addrCounts{max: int32(max), seed: maphash.MakeSeed(), shards: new([addrShards]addrShard)}
	for i := range c.shards {
		c.shards[i].n = map[lockout.Key]int32{}
	}
	return c
}

// shard returns k's shard.
func (c addrCounts) shard(k lockout.Key) *addrShard {
	return &c.shards[maphash.Bytes(c.seed, k[:])%addrShards]
}

// take counts one more read for k; false (and nothing counted) when k has
// max already.
func (c addrCounts) take(k lockout.Key) bool {
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.n[k] >= c.max {
		return false
	}
	sh.n[k]++
	return true
}

// give counts one read of k less.
func (c addrCounts) give(k lockout.Key) {
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.n[k] <= 1 {
		delete(sh.n, k)
		return
	}
	sh.n[k]--
}

// settleUnreadBody prepares an answer given without reading the request
// body (a rejection decided before it: wrong token, locked out, wrong
// content type, …). Go's HTTP/1 server would otherwise read the rest of
// the body before sending the answer, so a client that declares a body and
// never sends it would hold the connection, unanswered, until a server
// timeout. A small body that has arrived (or arrives within
// earlyDrainWait) is drained and the connection kept; otherwise the answer
// goes out at once and closes the connection; the read deadline lets the
// server read what still comes of the body for at most lateBodyGrace
// after the answer, so that a client still sending it sees the answer
// rather than a reset (Caddy's read idle timeout may end that sooner).
func settleUnreadBody(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 || r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	now := time.Now()
	// (a body that awaits "100 Continue" is not read: that would ask for it)
	if r.ContentLength <= earlyDrainLimit && setReadDeadline(w, now.Add(earlyDrainWait)) &&
		r.Header.Get("Expect") == "" && drainArrived(r.Body, earlyDrainLimit) {
		return // the server clears the deadline once the body is done
	}
	setReadDeadline(w, now.Add(lateBodyGrace))
	w.Header()["Connection"] = connectionClose[:1:1]
}

// tooLargeDrain bounds what is read and thrown away of an authenticated
// request's body over the limit before its 413 goes out.
const tooLargeDrain = 4 << 20

// discardTooLarge reads the rest of an authenticated sender's body that
// is over the limit, at most tooLargeDrain bytes within lateBodyGrace, and
// reports whether it got to the end (the connection is then kept). A
// sender still writing its body would otherwise see the connection reset
// instead of the 413; the reference gateway, too, answers 413 and then
// reads and discards what still comes. An unauthenticated body is never
// read this way.
func discardTooLarge(w http.ResponseWriter, r *http.Request, now time.Time) bool {
	if w == nil || r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody ||
		r.ContentLength > tooLargeDrain || r.Header.Get("Expect") != "" ||
		!setReadDeadline(w, now.Add(lateBodyGrace)) {
		return false
	}
	return drainArrived(r.Body, tooLargeDrain)
}

// connectionClose is the header value of an answer that closes the
// connection (shared; its capacity is its length).
var connectionClose = []string{"close"}

// drainBufs are the buffers drainArrived reads into.
var drainBufs = sync.Pool{New: func() any { return new([4 << 10]byte) }}

// drainArrived reads body to its end, at most limit bytes, and reports
// whether it got there.
func drainArrived(body io.Reader, limit int) bool {
	buf := drainBufs.Get().(*[4 << 10]byte)
	defer drainBufs.Put(buf)
	for n := 0; n <= limit; {
		m, err := body.Read(buf[:])
		n += m
		if err == io.EOF {
			return n <= limit
		}
		if err != nil {
			return false
		}
	}
	return false
}

// setReadDeadline sets the read deadline of w's connection, as
// http.ResponseController does (through the wrappers' Unwrap) but without
// allocating; false where the writer cannot.
func setReadDeadline(w http.ResponseWriter, d time.Time) bool {
	for {
		switch t := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			return t.SetReadDeadline(d) == nil
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

// read reads ex's body through limit (the hook name's) and within
// body_timeout. A body read before the request is authenticated (one a
// signature must authenticate) is bounded by unauthenticated_bodies
// instead (see begin; keys gives its address's lockout key); a slow or
// abandoned one counts as an authentication failure of its address. A
// slow authenticated body is a 408 that counts as nothing: the sender
// holds the token.
func (u *bodyReads) read(ex *exchange, limit int64, keys *lockoutGuard) *hookError {
	unauth := !ex.tokenOK
	if unauth {
		key := keys.KeyOf(ex.ip)
		if herr := u.begin(ex, key); herr != nil {
			return herr
		}
		defer u.end(ex, key)
	} else if ex.w != nil {
		setReadDeadline(ex.w, ex.now.Add(u.timeout))
	}
	var err error
	ex.body, err = readBody(ex.r, limit, ex.bodyBuf)
	switch {
	case err == nil:
		ex.bodyDone = true
		return nil
	case err == errBodyTooLarge:
		if !unauth {
			ex.bodyDone = discardTooLarge(ex.w, ex.r, ex.now)
		}
		return reject(http.StatusRequestEntityTooLarge, reasonTooLarge)
	case unauth && isTimeout(err):
		return authFailure(http.StatusRequestTimeout, reasonBodyTimeout)
	case unauth:
		return authFailure(http.StatusBadRequest, "could not read body")
	case isTimeout(err):
		return reject(http.StatusRequestTimeout, reasonBodyTimeout)
	}
	return reject(http.StatusBadRequest, "could not read body")
}

// isJSONContentType accepts application/json (with parameters) and the
// +json structured suffixes.
func isJSONContentType(ct string) bool {
	if ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// Body buffers by size class: class k holds buffers of at least
// minBodyBuffer<<k bytes, 4 KiB to 16 MiB; a larger one is not kept.
const (
	minBodyBuffer = 4 << 10
	bodyClasses   = 13
)

// bodyBuffers recycles the buffers request bodies are read into, by size
// class. A flood of large bodies (unauthenticated ones read in full to
// check their signature) would otherwise allocate each body afresh, and
// that churn counts against every transform call running meanwhile (its
// memory check reads the process's heap growth) and starves it of CPU
// for the collector.
type bodyBuffers [bodyClasses]sync.Pool

// bodyBufs are the handlers' body buffers (a pool, as Caddy's own
// buffers are: they hold no state of a request once given back).
var bodyBufs bodyBuffers

// get returns a buffer of capacity at least n (by pointer, for put).
func (b *bodyBuffers) get(n int) *[]byte {
	k := 0
	if n > minBodyBuffer {
		k = bits.Len(uint((n - 1) / minBodyBuffer))
	}
	if k < bodyClasses {
		if p, ok := b[k].Get().(*[]byte); ok {
			return p
		}
	}
	buf := make([]byte, 0, max(n, minBodyBuffer<<min(k, bodyClasses-1)))
	return &buf
}

// put gives a buffer back, to the largest class its capacity fills.
func (b *bodyBuffers) put(p *[]byte) {
	c := cap(*p)
	if c < minBodyBuffer || c >= minBodyBuffer<<bodyClasses {
		return
	}
	*p = (*p)[:0]
	b[bits.Len(uint(c/minBodyBuffer))-1].Put(p)
}

// grow replaces the buffer *p, holding n bytes, with one of at least
// twice its capacity holding the same bytes, and gives the old one back.
func (b *bodyBuffers) grow(p *[]byte, n int) []byte {
	np := b.get(2 * max(cap(*p), minBodyBuffer/2))
	next := append((*np)[:0], (*p)[:n]...)
	*np = *p // the old buffer goes back in the new one's holder
	b.put(np)
	*p = next
	return next
}

// errBodyTooLarge reports a body over the limit.
var errBodyTooLarge = errors.New("payload too large")

// readBody reads at most limit bytes of r's body into the buffer *bufp
// and fails with errBodyTooLarge past it, whether or not Content-Length
// was declared: an oversize chunked body is refused, never cut short. It
// grows the buffer as the body arrives (never ahead of it: a declared
// length costs nothing until the bytes come) with buffers of bodyBufs,
// whose larger one it leaves in *bufp, so that a flood of large bodies
// reuses buffers instead of allocating each one.
func readBody(r *http.Request, limit int64, bufp *[]byte) ([]byte, error) {
	if bufp == nil {
		bufp = new([]byte) // an exchange without one (a test's, a dry run's): a buffer of its own
	}
	buf := (*bufp)[:0]
	if r.ContentLength > limit {
		return buf, errBodyTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody {
		return buf, nil
	}
	lr := io.LimitedReader{R: r.Body, N: limit + 1}
	for {
		if len(buf) == cap(buf) {
			buf = bodyBufs.grow(bufp, len(buf))
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, errBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
