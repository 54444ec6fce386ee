package caddyhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/proxyprotocol"
	"go.uber.org/zap"
)

// Refusals of checkClientAddressSource: the lockout is keyed on the client
// address, so a server whose client address the client can choose, or that
// has none, would make the lockout either useless or a way to lock out
// everyone.
var (
	errLeftmostForwarded = errors.New("hooks: the server trusts proxies (trusted_proxies or trusted_proxies_unix) " +
		"without trusted_proxies_strict: Caddy then takes the client address from the leftmost X-Forwarded-For entry, " +
		"which the client itself writes, so a client could choose its own lockout key or lock out someone else's address; " +
		"add trusted_proxies_strict to the server's options (the address is then the rightmost one no trusted proxy added)")
	errProxyProtocolOpen = errors.New("hooks: the server's proxy_protocol listener wrapper takes the client address " +
		"from the PROXY header of every peer (an allow list covering all IPv4 or all IPv6 addresses, or fallback_policy " +
		"use or require), so any client could send one and choose its own lockout key or lock out someone else's address; " +
		"list only your proxies' networks in allow, with the default fallback_policy (a deny list does not make it safe)")
	errUnixNoProxy = errors.New("hooks: the server listens on a Unix socket without trusted_proxies_unix: such connections " +
		"have no client address, so every client would share one lockout key and one client's failures would lock out all; " +
		"set trusted_proxies_unix and trusted_proxies_strict in the server's options and have the proxy in front of the " +
		"socket send X-Forwarded-For (or use the proxy_protocol listener wrapper)")
)

// reasonLeftmostForwarded answers a request whose client address a
// non-strict trusted proxy setting let the client choose (only when the
// setting could not be seen at provision).
const reasonLeftmostForwarded = "server misconfigured: trusted_proxies without trusted_proxies_strict"

// clientAddressCheck is what provision learnt about the server's client
// addresses (leftmostUnknown asks for the request-time check), and what
// reads a request's client address: the lockout's key.
type clientAddressCheck struct {
	server          *caddyhttp.Server
	leftmostUnknown bool
	// logs bounds the lines about unparseable forwarded entries.
	logs *logBudget
	// metrics count the requests keyed on a trusted hop (see address).
	metrics *hookMetrics
	logger  *zap.Logger
}

// counting is c with the metrics and the logger of address.
func (c clientAddressCheck) counting(metrics *hookMetrics, logger *zap.Logger) clientAddressCheck {
	c.metrics, c.logger = metrics, logger
	return c
}

// checkClientAddressSource refuses a server whose client addresses cannot
// key the lockout: one that trusts forwarded headers without strict mode,
// or one that listens on a Unix socket without taking the address from a
// trusted proxy. A handler provisioned outside a server (a dry run) is not
// checked.
func checkClientAddressSource(ctx caddy.Context) (clientAddressCheck, error) {
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil {
		return clientAddressCheck{}, nil
	}
	return clientAddressProblem(srv)
}

// clientAddressProblem is checkClientAddressSource for a provisioned
// server. Caddy has loaded (and dropped the raw JSON of) trusted_proxies
// and the listener wrappers by the time handlers provision, so they are
// read from the loaded modules; should a Caddy version hide them, the
// trusted_proxies check moves to the request (leftmostUnknown).
func clientAddressProblem(srv *caddyhttp.Server) (clientAddressCheck, error) {
	c := clientAddressCheck{server: srv, logs: new(logBudget)}
	trusts, known := serverTrustsProxies(srv)
	if srv.TrustedProxiesStrict <= 0 {
		switch {
		case trusts || srv.TrustedProxiesUnix:
			return c, errLeftmostForwarded
		case !known:
			c.leftmostUnknown = true
		}
	}
	if proxyProtocolOpen(srv) {
		return c, errProxyProtocolOpen
	}
	if srv.TrustedProxiesUnix || serverHasWrapper(srv, "proxy_protocol") {
		return c, nil
	}
	for _, l := range srv.Listen {
		na, err := caddy.ParseNetworkAddress(l)
		if err == nil && na.IsUnixNetwork() {
			return c, fmt.Errorf("%w (listener %s)", errUnixNoProxy, l)
		}
	}
	return c, nil
}

// leftmost reports a request whose client address came from a trusted
// proxy's forwarded header read without strict mode (see
// clientAddressProblem); nil-safe, false unless the check is needed.
func (c clientAddressCheck) leftmost(r *http.Request) bool {
	if !c.leftmostUnknown || c.server.TrustedProxiesStrict > 0 {
		return false
	}
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	return trusted
}

// serverTrustsProxies reports whether srv loaded a trusted_proxies source;
// known is false when this Caddy version does not show it.
func serverTrustsProxies(srv *caddyhttp.Server) (trusts, known bool) {
	f := reflect.ValueOf(srv).Elem().FieldByName("trustedProxies")
	if !f.IsValid() || f.Kind() != reflect.Interface {
		return false, false
	}
	return !f.IsNil(), true
}

// serverHasWrapper reports whether srv loaded a listener wrapper of the
// named module (such as proxy_protocol, which gives every connection, Unix
// socket ones too, the address the proxy sends in the PROXY header).
func serverHasWrapper(srv *caddyhttp.Server, name string) bool {
	f := reflect.ValueOf(srv).Elem().FieldByName("listenerWrappers")
	if !f.IsValid() || f.Kind() != reflect.Slice {
		return false
	}
	for i := range f.Len() {
		e := f.Index(i)
		if e.Kind() == reflect.Interface && !e.IsNil() {
			t := e.Elem().Type()
			if t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			if strings.Contains(strings.ToLower(t.PkgPath()), strings.ReplaceAll(name, "_", "")) {
				return true
			}
		}
	}
	return false
}

// msgForwardedUnparsed is the log line of a request keyed on a trusted
// hop because the entry that hop wrote is not an address.
const msgForwardedUnparsed = "X-Forwarded-For entry is not an address"

// address is the address the lockout keys r on: Caddy's client
// address (see clientAddr), except where Caddy, in strict mode, skipped a
// forwarded entry that is not an address. Caddy then takes the next entry
// to its left, which the client may have written, or the peer when there is
// none; the key is instead the trusted hop that wrote the bad entry (the
// entry to its right, or the peer), so the client never chooses it. Such a
// request is counted and logged: the proxy in front writes something other
// than its client's address.
func (c clientAddressCheck) address(r *http.Request) netip.Addr {
	ip := clientAddr(r)
	srv := c.server
	if srv == nil || srv.TrustedProxiesStrict <= 0 {
		return ip
	}
	if trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool); !trusted {
		return ip
	}
	hop, skipped := forwardedHop(r, srv.ClientIPHeaders, ip)
	if !skipped {
		return ip
	}
	c.metrics.observeForwardedUnparsed()
	if ok, suppressed := c.logs.allow(time.Now()); ok {
		c.logger.Warn(msgForwardedUnparsed,
			zap.String("client_ip", hop.String()),
			zap.String("caddy_client_ip", ip.String()),
			zap.Strings("headers", srv.ClientIPHeaders),
			zap.Uint64("suppressed", suppressed))
	}
	return hop
}

// clientAddr is Caddy's resolved client IP (which honours the server's
// trusted_proxies), falling back to the peer address.
func clientAddr(r *http.Request) netip.Addr {
	if s, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok {
		if ip, err := netip.ParseAddr(s); err == nil {
			return ip
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, _ := netip.ParseAddr(host)
	return ip
}

// forwardedHop walks the client IP headers of r as Caddy's strict mode
// does (each header from its right end) up to chosen, the address Caddy
// chose; it reports whether an entry that is not an address came first,
// and then returns the address of the hop that wrote it: the entry to its
// right, or the peer. Caddy's choice is the first entry from the right
// that it does not trust, so every address before it is a trusted one; a
// chosen address equal to the peer is Caddy's fallback (no untrusted entry
// at all), and then every entry is walked.
func forwardedHop(r *http.Request, headers []string, chosen netip.Addr) (hop netip.Addr, skipped bool) {
	peer := peerAddr(r)
	fallback := !chosen.IsValid() || chosen == peer
	for _, name := range headers {
		values := r.Header.Values(name)
		if len(values) == 0 {
			continue
		}
		prev := peer
		for _, v := range slices.Backward(values) {
			for {
				part := v
				j := strings.LastIndexByte(v, ',')
				if j >= 0 {
					part, v = v[j+1:], v[:j]
				}
				a, ok := forwardedAddr(part)
				switch {
				case !ok:
					return prev, true
				case a == chosen && !fallback:
					return chosen, false
				}
				prev = a
				if j < 0 {
					break
				}
			}
		}
	}
	return chosen, false
}

// forwardedAddr parses one forwarded entry as Caddy does: an address with
// or without a port, blanks around it and a zone ignored.
func forwardedAddr(part string) (netip.Addr, bool) {
	host := strings.TrimSpace(part)
	host, _, _ = strings.Cut(host, "%")
	if a, err := netip.ParseAddr(host); err == nil {
		return a, true
	}
	if h, _, err := net.SplitHostPort(part); err == nil {
		h, _, _ = strings.Cut(strings.TrimSpace(h), "%")
		if a, err := netip.ParseAddr(h); err == nil {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// peerAddr is the address of r's connection (invalid on a Unix socket).
func peerAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	host, _, _ = strings.Cut(host, "%")
	a, _ := netip.ParseAddr(host)
	return a
}

// proxyProtocolOpen reports whether srv has a proxy_protocol listener
// wrapper that uses the PROXY header of every TCP peer: its fallback
// policy is use or require, or its allow list covers every IPv4 or every
// IPv6 address. The deny list is not taken into account: a client outside
// it could still choose its address.
func proxyProtocolOpen(srv *caddyhttp.Server) bool {
	f := reflect.ValueOf(srv).Elem().FieldByName("listenerWrappers")
	if !f.IsValid() || f.Kind() != reflect.Slice {
		return false
	}
	ppType := reflect.TypeFor[*proxyprotocol.ListenerWrapper]()
	for i := range f.Len() {
		e := f.Index(i)
		if e.Kind() != reflect.Interface || e.IsNil() || e.Elem().Type() != ppType {
			continue
		}
		pp := e.Elem().Elem()
		switch proxyprotocol.Policy(pp.FieldByName("FallbackPolicy").Int()) {
		case proxyprotocol.PolicyUSE, proxyprotocol.PolicyREQUIRE:
			return true
		default: // IGNORE, REJECT and SKIP take no address from the header
		}
		allow := pp.FieldByName("Allow")
		prefixes := make([]netip.Prefix, 0, allow.Len())
		for j := range allow.Len() {
			if p, err := netip.ParsePrefix(allow.Index(j).String()); err == nil {
				prefixes = append(prefixes, p.Masked())
			}
		}
		if coversAll(prefixes, netip.PrefixFrom(netip.IPv4Unspecified(), 0)) ||
			coversAll(prefixes, netip.PrefixFrom(netip.IPv6Unspecified(), 0)) {
			return true
		}
	}
	return false
}

// coversAll reports whether the union of set contains every address of
// p (all prefixes masked).
func coversAll(set []netip.Prefix, p netip.Prefix) bool {
	for _, q := range set {
		if q.Addr().BitLen() == p.Addr().BitLen() && q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	if p.Bits() == p.Addr().BitLen() {
		return false
	}
	// split p in halves, but only where some prefix of set lies inside p:
	// otherwise nothing covers the rest
	inside := false
	for _, q := range set {
		if q.Addr().BitLen() == p.Addr().BitLen() && q.Bits() > p.Bits() && p.Contains(q.Addr()) {
			inside = true
			break
		}
	}
	if !inside {
		return false
	}
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	hi := netip.PrefixFrom(setBit(p.Addr(), p.Bits()), p.Bits()+1)
	return coversAll(set, lo) && coversAll(set, hi)
}

// setBit returns a with bit i (0 = the most significant) set.
func setBit(a netip.Addr, i int) netip.Addr {
	if a.Is4() {
		b := a.As4()
		b[i/8] |= 0x80 >> (i % 8)
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	b[i/8] |= 0x80 >> (i % 8)
	return netip.AddrFrom16(b)
}
