package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/pflag"
)

// requestTimeout bounds one admin API request (a stream has none).
const requestTimeout = 30 * time.Second

// ErrUnreachable: nothing answers at the admin address.
var ErrUnreachable = errors.New("admin API unreachable")

// Error is an error answer of the admin API.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("admin API: %s (HTTP %d)", e.Msg, e.Status)
}

// errorOf is the *Error of an answer with status and body data: Caddy's
// {"error": "…"}, else the start of the body.
func errorOf(status int, data []byte) *Error {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(data[:min(len(data), 200)]))
	}
	return &Error{Status: status, Msg: e.Error}
}

// Client sends requests to a Caddy admin endpoint, the way caddycmd's
// AdminAPIRequest does, keeping the status and JSON error of each answer.
type Client struct {
	origin string // scheme and host of request URLs
	header http.Header
	client *http.Client
}

// NewClient returns a client for an admin listen address
// (localhost:2019, unix//path.sock, …).
func NewClient(addr string) (*Client, error) {
	na, err := caddy.ParseNetworkAddress(addr)
	if err != nil || na.PortRangeSize() > 1 {
		return nil, fmt.Errorf("invalid admin address %s: %v", addr, err)
	}
	network, dial := na.Network, na.JoinHostPort(0)
	ac := &Client{origin: "http://" + dial, header: http.Header{}}
	if na.IsUnixNetwork() || na.IsFdNetwork() {
		dial, _, _ = strings.Cut(na.Host, "|") // drop the socket's permission bits
		ac.origin = "http://127.0.0.1"         // any host; Caddy skips the host check there
	} else {
		ac.header.Set("Origin", ac.origin)
	}
	ac.client = &http.Client{Timeout: requestTimeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, dial)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
			}
			return conn, nil
		},
	}}
	return ac, nil
}

// AddFlags defines the flags FromFlags reads on fl: --address, --config
// and --adapter, as `caddy reload` has them.
func AddFlags(fl *pflag.FlagSet) {
	fl.String("address", "", "Admin API address of the running Caddy (default: from --config, else localhost:2019)")
	fl.String("config", "", "Config file whose admin address to use (default: ./Caddyfile if present)")
	fl.String("adapter", "", "Adapter of --config")
}

// BaseUsage is the help of --base, the flag of every `caddy hooks …`
// command that chooses a hooks handler by its base path.
const BaseUsage = "Base path of the hooks handler (e.g. /hooks), when the config has several"

// AddBaseFlag defines --base on fl, and --path, its former name, as a
// deprecated alias (hidden, and warned about when used).
func AddBaseFlag(fl *pflag.FlagSet) {
	fl.String("base", "", BaseUsage)
	fl.String("path", "", BaseUsage)
	_ = fl.MarkDeprecated("path", "use --base") // the flag was just defined
}

// Base returns the base path AddBaseFlag's flags give: --base, else the
// deprecated --path.
func Base(fl *pflag.FlagSet) string {
	if b, _ := fl.GetString("base"); b != "" {
		return b
	}
	b, _ := fl.GetString("path")
	return b
}

// FromFlags returns a client for the admin API of the running Caddy,
// found as `caddy reload` finds it: --address, else the admin address of
// --config (or of ./Caddyfile), else localhost:2019; and that address.
func FromFlags(fl *pflag.FlagSet) (*Client, string, error) {
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
	ac, err := NewClient(addr)
	return ac, addr, err
}

// Origin is the scheme and host the client's requests go to.
func (a *Client) Origin() string { return a.origin }

// Transport is the client's connection to the admin endpoint.
func (a *Client) Transport() http.RoundTripper { return a.client.Transport }

// SetHeaders sets the headers every request to the admin endpoint
// carries (its Origin, which Caddy's origin check wants).
func (a *Client) SetHeaders(h http.Header) {
	maps.Copy(h, a.header)
}

// Do sends a request with body (JSON-encoded unless nil) and decodes a 2xx
// answer into into; an error answer becomes an *Error.
func (a *Client) Do(method, uri string, body, into any) error {
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
	a.SetHeaders(req.Header)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		if errors.Is(err, ErrUnreachable) {
			return ErrUnreachable
		}
		return fmt.Errorf("admin API %s %s: %v", method, uri, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return fmt.Errorf("admin API %s %s: reading the answer: %v", method, uri, err)
	}
	if resp.StatusCode >= 300 {
		return errorOf(resp.StatusCode, data)
	}
	if into == nil {
		return nil
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("admin API %s %s: %v", method, uri, err)
	}
	return nil
}

// Stream sends a GET for a stream of Server-Sent Events (no overall
// timeout), resuming after lastID when set, and returns the open answer;
// an error answer becomes an *Error.
func (a *Client) Stream(ctx context.Context, uri, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.origin+uri, nil)
	if err != nil {
		return nil, err
	}
	a.SetHeaders(req.Header)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := (&http.Client{Transport: a.client.Transport}).Do(req)
	if err != nil {
		if errors.Is(err, ErrUnreachable) {
			return nil, ErrUnreachable
		}
		return nil, fmt.Errorf("admin API: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, errorOf(resp.StatusCode, b)
	}
	return resp, nil
}
