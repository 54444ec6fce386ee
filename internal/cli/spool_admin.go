package cli

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/pflag"

	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/adminapi"
)

// connect looks for the hooks admin API of a running Caddy, as `caddy
// reload` finds the admin endpoint (--address, else the admin address of
// --config or ./Caddyfile, else localhost:2019). It returns the selected
// handler's spool operated through it, or nil (no error) when no Caddy
// answers there, or when none of its handlers uses --dir: the caller then
// opens the spool file.
func (c *spoolCLI) connect(fl *pflag.FlagSet, dir string) (spool.Ops, error) {
	base := adminapi.Base(fl)
	ac, addr, err := adminapi.FromFlags(fl)
	if err != nil {
		return nil, err
	}
	c.admin = addr
	var handlers []adminapi.HandlerStatus
	if err := ac.Do(http.MethodGet, adminapi.Prefix, nil, &handlers); err != nil {
		var ae *adminapi.Error
		switch {
		case errors.Is(err, adminapi.ErrUnreachable):
			return nil, nil // Caddy is not running there
		case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
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

// pickSpooled selects the running handler whose spool the command works
// on: by --base, else by --dir (none: nil, the file is opened instead),
// else the only one with a spool.
func (c *spoolCLI) pickSpooled(handlers []adminapi.HandlerStatus, dir, base string) (*adminapi.HandlerStatus, error) {
	var spooled []*adminapi.HandlerStatus
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
		return nil, fmt.Errorf("the Caddy running at %s has no hooks handler with a spool at --base %s (%s)", c.admin, base, spooledChoices(spooled))
	case dir != "":
		cfg, err := spoolConfig(dir)
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
	return nil, fmt.Errorf("the Caddy running at %s has several spools; choose one with --base or --dir (%s)", c.admin, spooledChoices(spooled))
}

// spooledChoices names handlers and their spools for an error message.
func spooledChoices(hs []*adminapi.HandlerStatus) string {
	if len(hs) == 0 {
		return "none has a spool"
	}
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = "--base " + h.Path + " = --dir " + h.Spool.Dir
	}
	return strings.Join(names, "; ")
}

// adminSpool is a running handler's spool operated through the admin API.
type adminSpool struct {
	api  *adminapi.Client
	base string // the handler's base path
}

// uri is an admin route for the handler.
func (s *adminSpool) uri(route string, extra ...string) string {
	q := url.Values{"path": {s.base}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return adminapi.Prefix + route + "?" + q.Encode()
}

// Status implements spool.Ops.
func (s *adminSpool) Status() (spool.Stats, error) {
	var hs []adminapi.HandlerStatus
	if err := s.api.Do(http.MethodGet, s.uri(""), nil, &hs); err != nil {
		return spool.Stats{}, err
	}
	if len(hs) != 1 || hs[0].Spool == nil {
		return spool.Stats{}, fmt.Errorf("admin API: the handler at %s has no spool any more", s.base)
	}
	if sp := hs[0].Spool; sp.Error != "" {
		return spool.Stats{}, fmt.Errorf("admin API: the spool of %s: %s", s.base, sp.Error)
	}
	return hs[0].Spool.Stats(), nil
}

// DeadLetters implements spool.Ops (with the bodies).
func (s *adminSpool) DeadLetters() ([]*spool.Event, error) {
	var dead []adminapi.DeadLetter
	if err := s.api.Do(http.MethodGet, s.uri("spool/dead", "body", "1"), nil, &dead); err != nil {
		return nil, err
	}
	evs := make([]*spool.Event, len(dead))
	for i := range dead {
		evs[i] = dead[i].Event()
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
	sel := adminapi.DeadSelection{IDs: ids, All: len(ids) == 0}
	if err := s.api.Do(http.MethodPost, s.uri("spool/dead/"+op), sel, &res); err != nil {
		return 0, err
	}
	return res[verb], nil
}

// Pause implements spool.Ops.
func (s *adminSpool) Pause() error { return s.api.Do(http.MethodPost, s.uri("spool/pause"), nil, nil) }

// Resume implements spool.Ops.
func (s *adminSpool) Resume() error {
	return s.api.Do(http.MethodPost, s.uri("spool/resume"), nil, nil)
}

// Interface guard
var _ spool.Ops = (*adminSpool)(nil)
