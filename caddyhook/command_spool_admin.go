package caddyhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/pflag"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
)

// adminCLITimeout bounds one admin API request of the spool commands.
const adminCLITimeout = 30 * time.Second

// connect looks for the hooks admin API of a running Caddy, as `caddy
// reload` finds the admin endpoint (--address, else the admin address of
// --config or ./Caddyfile, else localhost:2019). It returns the selected
// handler's spool operated through it, or nil (no error) when no Caddy
// answers there, or when none of its handlers uses --dir: the caller then
// opens the spool file.
func (c *spoolCLI) connect(fl *pflag.FlagSet, dir string) (spool.Ops, error) {
	base, _ := fl.GetString("path")
	ac, addr, err := adminFromFlags(fl)
	if err != nil {
		return nil, err
	}
	c.admin = addr
	var handlers []handlerStatus
	if err := ac.do(http.MethodGet, "/hooks/", nil, &handlers); err != nil {
		var ae *adminAPIError
		switch {
		case errors.Is(err, errAdminUnreachable):
			return nil, nil // Caddy is not running there
		case errors.As(err, &ae) && ae.status == http.StatusNotFound:
			return nil, nil // a Caddy without caddyhook's admin API
		}
		return nil, err
	}
	h, err := c.pickSpooled(handlers, dir, base)
	if h == nil || err != nil {
		return nil, err
	}
	c.live, c.dir = true, h.Spool.Dir
	return &adminSpool{api: ac, base: h.Path}, nil
}

// adminFromFlags returns a client for the admin API of the running Caddy,
// found as `caddy reload` finds it: --address, else the admin address of
// --config (or of ./Caddyfile), else localhost:2019; and that address.
func adminFromFlags(fl *pflag.FlagSet) (*adminClient, string, error) {
	address, _ := fl.GetString("address")
	configFile, _ := fl.GetString("config")
	adapter, _ := fl.GetString("adapter")
	if address == "" && configFile == "" {
		if _, err := os.Stat("Caddyfile"); err == nil {
			configFile = "Caddyfile"
		}
	}
	addr, err := caddycmd.DetermineAdminAPIAddress(address, nil, configFile, adapter)
	if err != nil {
		return nil, "", fmt.Errorf("finding the admin API address: %v", err)
	}
	ac, err := newAdminClient(addr)
	return ac, addr, err
}

// pickSpooled selects the running handler whose spool the command works
// on: by --path, else by --dir (none: nil, the file is opened instead),
// else the only one with a spool.
func (c *spoolCLI) pickSpooled(handlers []handlerStatus, dir, base string) (*handlerStatus, error) {
	var spooled []*handlerStatus
	for i := range handlers {
		if handlers[i].Spool != nil {
			spooled = append(spooled, &handlers[i])
		}
	}
	switch {
	case base != "":
		base = strings.TrimRight(base, "/")
		for _, h := range spooled {
			if h.Path == base {
				return h, nil
			}
		}
		return nil, fmt.Errorf("the Caddy running at %s has no hooks handler with a spool at --path %s (%s)", c.admin, base, spooledChoices(spooled))
	case dir != "":
		cfg, err := (&SpoolConfig{Dir: dir}).config()
		if err != nil {
			return nil, err
		}
		for _, h := range spooled {
			if h.Spool.Dir == cfg.Dir {
				return h, nil
			}
		}
		return nil, nil
	case len(spooled) == 1:
		return spooled[0], nil
	case len(spooled) == 0:
		return nil, fmt.Errorf("the Caddy running at %s has no hooks handler with a spool; for a spool file, give --dir", c.admin)
	}
	return nil, fmt.Errorf("the Caddy running at %s has several spools; choose one with --path or --dir (%s)", c.admin, spooledChoices(spooled))
}

// spooledChoices names handlers and their spools for an error message.
func spooledChoices(hs []*handlerStatus) string {
	if len(hs) == 0 {
		return "none has a spool"
	}
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = "--path " + h.Path + " = --dir " + h.Spool.Dir
	}
	return strings.Join(names, "; ")
}

// errAdminUnreachable: nothing answers at the admin address.
var errAdminUnreachable = errors.New("admin API unreachable")

// adminAPIError is an error answer of the admin API.
type adminAPIError struct {
	status int
	msg    string
}

func (e *adminAPIError) Error() string {
	return fmt.Sprintf("admin API: %s (HTTP %d)", e.msg, e.status)
}

// adminClient sends requests to a Caddy admin endpoint, the way caddycmd's
// AdminAPIRequest does, keeping the status and JSON error of each answer.
type adminClient struct {
	origin string // scheme and host of request URLs
	header http.Header
	client *http.Client
}

// newAdminClient returns a client for an admin listen address
// (localhost:2019, unix//path.sock, …).
func newAdminClient(addr string) (*adminClient, error) {
	na, err := caddy.ParseNetworkAddress(addr)
	if err != nil || na.PortRangeSize() > 1 {
		return nil, fmt.Errorf("invalid admin address %s: %v", addr, err)
	}
	network, dial := na.Network, na.JoinHostPort(0)
	ac := &adminClient{origin: "http://" + dial, header: http.Header{}}
	if na.IsUnixNetwork() || na.IsFdNetwork() {
		dial, _, _ = strings.Cut(na.Host, "|") // drop the socket's permission bits
		ac.origin = "http://127.0.0.1"         // any host; Caddy skips the host check there
	} else {
		ac.header.Set("Origin", ac.origin)
	}
	ac.client = &http.Client{Timeout: adminCLITimeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, dial)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", errAdminUnreachable, err)
			}
			return conn, nil
		},
	}}
	return ac, nil
}

// do sends a request with body (JSON-encoded unless nil) and decodes a 2xx
// answer into into; an error answer becomes an *adminAPIError.
func (a *adminClient) do(method, uri string, body, into any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.origin+uri, rd)
	if err != nil {
		return err
	}
	for k, v := range a.header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		if errors.Is(err, errAdminUnreachable) {
			return errAdminUnreachable
		}
		return fmt.Errorf("admin API %s %s: %v", method, uri, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return fmt.Errorf("admin API %s %s: reading the answer: %v", method, uri, err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(data[:min(len(data), 200)]))
		}
		return &adminAPIError{status: resp.StatusCode, msg: e.Error}
	}
	if into == nil {
		return nil
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("admin API %s %s: %v", method, uri, err)
	}
	return nil
}

// adminSpool is a running handler's spool operated through the admin API.
type adminSpool struct {
	api  *adminClient
	base string // the handler's base path
}

// uri is an admin route for the handler.
func (s *adminSpool) uri(route string, extra ...string) string {
	q := url.Values{"path": {s.base}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return adminPrefix + route + "?" + q.Encode()
}

// Status implements spool.Ops.
func (s *adminSpool) Status() (spool.Stats, error) {
	var hs []handlerStatus
	if err := s.api.do(http.MethodGet, s.uri(""), nil, &hs); err != nil {
		return spool.Stats{}, err
	}
	if len(hs) != 1 || hs[0].Spool == nil {
		return spool.Stats{}, fmt.Errorf("admin API: the handler at %s has no spool any more", s.base)
	}
	sp := hs[0].Spool
	if sp.Error != "" {
		return spool.Stats{}, fmt.Errorf("admin API: the spool of %s: %s", s.base, sp.Error)
	}
	rate, _ := spool.ParseRate(sp.Rate)
	return spool.Stats{Depth: sp.Depth, InFlight: sp.InFlight, Dead: sp.DeadLetters, Bytes: sp.Bytes,
		MaxBytes: sp.MaxBytes, OldestAge: time.Duration(sp.OldestAgeSeconds * float64(time.Second)),
		Paused: sp.Paused, Rate: rate}, nil
}

// DeadLetters implements spool.Ops (with the bodies).
func (s *adminSpool) DeadLetters() ([]*spool.Event, error) {
	var dead []deadLetterJSON
	if err := s.api.do(http.MethodGet, s.uri("spool/dead", "body", "1"), nil, &dead); err != nil {
		return nil, err
	}
	evs := make([]*spool.Event, len(dead))
	for i, d := range dead {
		evs[i] = &spool.Event{ID: d.ID, Kind: d.Kind, Path: d.Path, LastError: d.Reason, Attempts: d.Attempts,
			FirstSeen: d.FirstSeen, ClientIP: d.ClientIP, TraceParent: d.TraceParent, Body: []byte(d.BodyText)}
		if d.Body != nil {
			evs[i].Body = d.Body
		}
	}
	return evs, nil
}

// Retry implements spool.Ops.
func (s *adminSpool) Retry(ids ...string) (int, error) { return s.applyDead("retry", "retried", ids) }

// Drop implements spool.Ops.
func (s *adminSpool) Drop(ids ...string) (int, error) { return s.applyDead("drop", "dropped", ids) }

// applyDead posts a retry or drop of ids (all when none).
func (s *adminSpool) applyDead(op, verb string, ids []string) (int, error) {
	var res map[string]int
	sel := deadSelection{IDs: ids, All: len(ids) == 0}
	if err := s.api.do(http.MethodPost, s.uri("spool/dead/"+op), sel, &res); err != nil {
		return 0, err
	}
	return res[verb], nil
}

// Pause implements spool.Ops.
func (s *adminSpool) Pause() error { return s.api.do(http.MethodPost, s.uri("spool/pause"), nil, nil) }

// Resume implements spool.Ops.
func (s *adminSpool) Resume() error {
	return s.api.do(http.MethodPost, s.uri("spool/resume"), nil, nil)
}

// Interface guard
var _ spool.Ops = (*adminSpool)(nil)
