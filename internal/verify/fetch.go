package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Fetch bounds.
const (
	// fetchTimeout bounds one fetch (connect, TLS, headers and body).
	fetchTimeout = 10 * time.Second
	// maxFetchSize bounds a fetched document (a certificate, a key set).
	maxFetchSize = 64 << 10
	// maxCacheEntries bounds the documents one fetcher keeps.
	maxCacheEntries = 32
	// fetchRetryAfter is how long a failed fetch is remembered before it
	// is tried again (so a flood of requests does not become a flood of
	// fetches).
	fetchRetryAfter = 30 * time.Second
	// minRefetch bounds how often one URL is fetched again to look for a
	// key that was not in it.
	minRefetch = time.Minute
)

// hostList is an allow-list of hosts: exact names or "*.suffix" (any
// name under suffix, not suffix itself), or a matcher.
type hostList struct {
	names []string
	match func(host string) bool // a provider's own rule (SNS regions)
	desc  string
}

// allows reports whether host (no port) is allowed.
func (l hostList) allows(host string) bool {
	host = strings.ToLower(host)
	if l.match != nil && l.match(host) {
		return true
	}
	for _, n := range l.names {
		if suffix, ok := strings.CutPrefix(n, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) && len(host) > len(suffix)+1 {
				return true
			}
		} else if host == n {
			return true
		}
	}
	return false
}

// String describes the list.
func (l hostList) String() string {
	if len(l.names) > 0 {
		return strings.Join(l.names, ", ")
	}
	return l.desc
}

// hostsFor returns the configured cert_hosts as a list, else def.
func (b *builder) hostsFor(def hostList) (hostList, error) {
	if len(b.cfg.CertHosts) == 0 {
		return def, nil
	}
	var out hostList
	for i, h := range b.cfg.CertHosts {
		h = strings.ToLower(strings.TrimSpace(h))
		name := strings.TrimPrefix(h, "*.")
		if name == "" || strings.ContainsAny(name, "*/:@ ") || !strings.Contains(name, ".") {
			return hostList{}, fmt.Errorf("cert_hosts[%d]: %q is not a host name or *.suffix", i, h)
		}
		out.names = append(out.names, h)
	}
	return out, nil
}

// checkFetchURL checks that raw is an https URL on an allowed host, with
// no user info and no port other than 443.
func checkFetchURL(raw string, hosts hostList) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("does not parse")
	case u.Scheme != "https":
		return nil, errors.New("not https")
	case u.User != nil:
		return nil, errors.New("has user info")
	case u.Port() != "" && u.Port() != "443":
		return nil, errors.New("has a port")
	case !hosts.allows(u.Hostname()):
		return nil, fmt.Errorf("host %q is not allow-listed (%s)", u.Hostname(), hosts)
	}
	return u, nil
}

// fetcher fetches small documents from allow-listed https URLs and keeps
// them parsed: a cached document costs a map look-up, never a fetch.
type fetcher struct {
	client *http.Client
	hosts  hostList
	ttl    time.Duration // how long a document is kept
	parse  func([]byte) (any, error)

	mu      sync.Mutex
	entries map[string]*fetchEntry
}

// fetchEntry is one URL's document.
type fetchEntry struct {
	done    chan struct{} // closed when the fetch in flight ends
	val     any
	err     error
	at      time.Time // when fetched (or failed)
	expires time.Time
}

// newFetcher returns a fetcher of URLs on hosts, kept for ttl, parsed by parse.
func newFetcher(client *http.Client, hosts hostList, ttl time.Duration, parse func([]byte) (any, error)) *fetcher {
	return &fetcher{client: client, hosts: hosts, ttl: ttl, parse: parse, entries: map[string]*fetchEntry{}}
}

// get returns the parsed document at raw: cached when fresh, else fetched
// (one fetch per URL at a time; others wait for it). refresh asks for a
// new copy of a cached one (a key was missing), at most once per
// minRefetch. now is the request's clock (for the cache), the fetch itself
// is bounded by the client's timeout.
func (f *fetcher) get(ctx context.Context, raw string, now time.Time, refresh bool) (any, error) {
	u, err := checkFetchURL(raw, f.hosts)
	if err != nil {
		return nil, err
	}
	key := u.String()
	f.mu.Lock()
	e := f.entries[key]
	if e != nil {
		select {
		case <-e.done:
			fresh := now.Before(e.expires)
			if e.err != nil {
				fresh = now.Sub(e.at) < fetchRetryAfter
			}
			if refresh && e.err == nil && now.Sub(e.at) >= minRefetch {
				fresh = false
			}
			if fresh {
				f.mu.Unlock()
				return e.val, e.err
			}
		default: // in flight
			f.mu.Unlock()
			return waitEntry(ctx, e)
		}
	}
	if len(f.entries) >= maxCacheEntries {
		f.evict()
	}
	e = &fetchEntry{done: make(chan struct{})}
	f.entries[key] = e
	f.mu.Unlock()

	e.val, e.err = f.fetch(ctx, key)
	e.at = now
	e.expires = now.Add(f.ttl)
	close(e.done)
	return e.val, e.err
}

// waitEntry waits for an in-flight fetch.
func waitEntry(ctx context.Context, e *fetchEntry) (any, error) {
	select {
	case <-e.done:
		return e.val, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// evict drops finished entries, oldest first, until there is room (f.mu held).
func (f *fetcher) evict() {
	for len(f.entries) >= maxCacheEntries {
		var oldK string
		var old *fetchEntry
		for k, e := range f.entries {
			select {
			case <-e.done:
			default:
				continue
			}
			if old == nil || e.at.Before(old.at) {
				oldK, old = k, e
			}
		}
		if old == nil {
			return
		}
		delete(f.entries, oldK)
	}
}

// fetch GETs key and parses it.
func (f *fetcher) fetch(ctx context.Context, key string) (any, error) {
	body, err := fetchBounded(ctx, f.client, key)
	if err != nil {
		return nil, err
	}
	return f.parse(body)
}

// fetchBounded GETs raw (already checked) within fetchTimeout and reads at
// most maxFetchSize bytes of a 200 answer.
func fetchBounded(ctx context.Context, client *http.Client, raw string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, errors.New("fetch failed")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFetchSize+1))
	switch {
	case err != nil:
		return nil, errors.New("fetch interrupted")
	case len(body) > maxFetchSize:
		return nil, fmt.Errorf("fetched document larger than %d bytes", maxFetchSize)
	}
	return body, nil
}
