package caddyhook

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/safetext"
	"github.com/caddyhook/caddyhook/internal/secret"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// newTestCommand builds `caddy hooks test`: a dry run of one request
// through a configured hooks handler, without dispatching.
func newTestCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "test [--config <file>] [--adapter caddyfile] [--base <path>] --path <name> [--payload <file.json>] [--header 'K: V']... [--token <value> | --no-token]",
		Short: "Dry-runs a hook request through the configured mappings and policy",
		Long: `
Loads the config as "caddy run" does (--config, else ./Caddyfile; the Caddyfile
adapter for a name starting with Caddyfile or ending in .caddyfile, or with
--adapter caddyfile), finds its hooks handler (--base chooses one when there are
several) and runs one request through the whole
pipeline (authentication, body limit, signature verification, mappings, CEL,
transforms, policy, safety wrapper, idempotency) without dispatching anything and
without touching a spool or any shared state (with cluster mode configured it
does not connect to the cluster: no idempotency key is claimed, no failure
shared, nothing queued). Prints the reply a live request would get (for a
rejection: the status and its precise reason) and the exact
gateway request body of every resulting action, as JSON:

  {"status":200,"reply":{...},"actions":[{"kind":"agent","idempotency_key":"...","body":{...}}]}

In forward mode (or for a forward mapping) the one action is the forwarded
request: {"kind":"forward","forward":true,"path":"/hooks/<name>?<query>",
"headers":{...},"idempotency_key":"<the sender's, if any>","body":<the body
as sent>}, path, query and headers as they cross to the gateway; the reply
shown is the dry run's, not the gateway's (which resolves the hook itself).

or, for a rejection, {"status":<code>,"error":"<reason>"} (exit status 1).

A provider's endpoint handshake answered at the edge, or its
acknowledgement of an accepted request (Discord's deferred response,
Twilio's empty TwiML), is shown as "answer": {"what","status",
"content_type","body"}: what the sender gets. The payload is sent as
application/json unless a --header sets Content-Type (a provider's form:
'Content-Type: application/x-www-form-urlencoded').

The configured hook token (the first, when there are several) is presented as
a bearer token, unless --token gives another (a value or a placeholder such as
'{env.HOOK_TOKEN_NEW}': during a rotation, check that the new token
authenticates before moving senders to it), --no-token is given, or a --header
sets Authorization or a token header (use --no-token with the provider's
headers to check a signed fixture). The report says which configured token
authenticated ("auth": "token 2 of 2"). A token placeholder whose variable is
not set is replaced by a random token for the dry run. Secrets are never
printed.

What the handler logs while it is set up goes to stderr, one line per
warning (a literal secret, a shadowed mapping, …); --debug logs
everything, with stack traces.
`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var o dryRunOptions
			f := cmd.Flags()
			o.config, _ = f.GetString("config")
			o.adapter, _ = f.GetString("adapter")
			o.base, _ = f.GetString("base")
			o.path, _ = f.GetString("path")
			o.payload, _ = f.GetString("payload")
			o.headers, _ = f.GetStringArray("header")
			o.noToken, _ = f.GetBool("no-token")
			o.token, _ = f.GetString("token")
			o.debug, _ = f.GetBool("debug")
			rejected, err := runDryRun(cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
			if err != nil {
				return err
			}
			if rejected {
				cmd.SilenceUsage = true
				return errRejected
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringP("config", "c", "", "Config file (default: ./Caddyfile), loaded as caddy run loads it")
	f.StringP("adapter", "a", "", "Config adapter (default: caddyfile for a name starting with Caddyfile or ending in .caddyfile, else JSON)")
	f.String("base", "", adminapi.BaseUsage)
	f.String("path", "", "Hook name (e.g. gmail) or full request path (e.g. /hooks/gmail), optionally with a query (required)")
	f.String("payload", "", "JSON body file (default: empty body, i.e. {}); - reads stdin")
	f.StringArray("header", nil, "Request header 'Name: value' (repeatable)")
	f.Bool("no-token", false, "Do not present the hook token (as a provider that signs requests would)")
	f.String("token", "", "Present this token instead of the configured one (a value or a placeholder such as {env.HOOK_TOKEN_NEW})")
	f.Bool("debug", false, "Log everything the handler logs while it is set up, with stack traces")
	return cmd
}

// errRejected makes the command exit 1 after printing a rejection.
var errRejected = errors.New("the request would be rejected")

// dryRunOptions are the flags of `caddy hooks test`.
type dryRunOptions struct {
	config, adapter, base, path, payload string
	headers                              []string
	noToken                              bool
	token                                string // presented instead of the configured token
	debug                                bool   // log at debug level, with stack traces
}

// dryRunReport is what `caddy hooks test` prints.
type dryRunReport struct {
	Status  int    `json:"status"`
	Auth    string `json:"auth,omitempty"` // which configured token authenticated
	Mapping string `json:"mapping,omitempty"`
	Reason  string `json:"reason,omitempty"` // why a 204 dispatched nothing
	// PassedOver are the mappings that answer the hook name but did not
	// take the request, and why ("github-push: match_expr false").
	PassedOver []string        `json:"passed_over,omitempty"`
	Reply      json.RawMessage `json:"reply,omitempty"`
	Error      string          `json:"error,omitempty"`
	Actions    []dryRunAction  `json:"actions,omitempty"`
	Dropped    int             `json:"dropped,omitempty"`
	// Answer is what the sender gets instead of reply: a provider's
	// handshake answered at the edge, or its acknowledgement of an
	// accepted request.
	Answer *dryRunAnswer `json:"answer,omitempty"`
}

// dryRunAnswer is an answer the edge gives itself.
type dryRunAnswer struct {
	What        string `json:"what"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Body        string `json:"body"`
}

// dryRunAction is one action as the gateway would receive it. A
// forwarded request also shows the gateway path (with the forwarded
// query) and headers; its body is shown as sent (as text when it is not
// plain JSON, e.g. with a byte order mark).
type dryRunAction struct {
	Kind           string            `json:"kind"`
	Forward        bool              `json:"forward,omitempty"`
	Path           string            `json:"path,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	IdempotencyKey string            `json:"idempotency_key"`
	Body           json.RawMessage   `json:"body,omitempty"`
	BodyText       *string           `json:"body_text,omitempty"`
}

// newDryRunAction describes one prepared request.
func newDryRunAction(it *prepared) dryRunAction {
	a := dryRunAction{Kind: it.kind.String(), IdempotencyKey: it.idemKey}
	if it.forward {
		// the key the gateway gets is the sender's own, if any (see
		// forwarder.prepare; a dry run has no spool)
		a.Kind, a.Forward, a.Path, a.IdempotencyKey = "forward", true, it.path, strings.Join(it.header["Idempotency-Key"], ", ")
		a.Headers = make(map[string]string, len(it.header))
		for k, v := range it.header {
			a.Headers[k] = strings.Join(v, ", ")
		}
	}
	if json.Valid(it.body) && len(it.body) > 0 && it.body[0] == '{' {
		a.Body = it.body
	} else {
		text := string(it.body)
		a.BodyText = &text
	}
	return a
}

// runDryRun loads the config, runs the request and prints the report. It
// reports whether the request was rejected.
func runDryRun(out, notes io.Writer, o dryRunOptions) (bool, error) {
	if o.path == "" {
		return false, errors.New("--path is required: the hook name (e.g. gmail) or the request path (e.g. /hooks/gmail)")
	}
	if o.noToken && o.token != "" {
		return false, errors.New("--token and --no-token exclude each other")
	}
	raw, err := loadHooksConfig(o.config, o.adapter, o.base)
	if err != nil {
		return false, err
	}
	body, err := readPayload(o.payload)
	if err != nil {
		return false, err
	}
	h := new(Handler)
	if err := json.Unmarshal(raw, h); err != nil {
		return false, fmt.Errorf("hooks handler config: %w", err)
	}
	stand, err := os.MkdirTemp("", "caddyhook-dry-run")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(stand)
	token, err := prepareDryRun(h, o.path, stand, notes)
	if err != nil {
		return false, err
	}
	var logLevel zap.AtomicLevel
	h.logger, logLevel = dryRunLogger(notes, o.debug)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	err = h.Provision(ctx)
	defer func() { _ = h.Cleanup() }() // a dry run's handler holds nothing shared: nothing to report
	if err != nil {
		return false, fmt.Errorf("provision: %w", err)
	}
	if err := h.Validate(); err != nil {
		return false, fmt.Errorf("validate: %w", err)
	}
	if !h.enabled {
		return false, errors.New("the hooks handler is disabled (enabled false)")
	}
	// the report says everything; never echo payloads: nothing the
	// handler's concerns log from here on is written
	logLevel.SetLevel(zapcore.FatalLevel + 1)
	dry := &dryRunSink{}
	h.sink = dry

	hookPath, query, _ := strings.Cut(strings.TrimSpace(o.path), "?")
	sub := strings.Trim(strings.TrimPrefix(hookPath, h.base), "/")
	target := h.base + "/" + sub
	if query != "" {
		target += "?" + query
	}
	req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(string(body)))
	req.RemoteAddr = "127.0.0.1:1"
	for _, kv := range o.headers {
		k, v, ok := strings.Cut(kv, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return false, fmt.Errorf("--header %q: want 'Name: value'", kv)
		}
		req.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if o.token != "" {
		if token = strings.TrimSpace(caddy.NewReplacer().ReplaceKnown(o.token, "")); token == "" {
			return false, fmt.Errorf("--token: %s", secret.Empty(o.token, "--token '{env.HOOK_TOKEN}'"))
		}
	}
	if !o.noToken && req.Header.Get("Authorization") == "" && !h.tokens.headerPresent(req) {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	ex := exchange{r: req, sub: sub, ip: clientAddr(req), now: time.Now(), route: "none", trace: true}
	status, reply, herr := h.process(&ex)
	rep := dryRunReport{Status: status, Dropped: dry.dropped, Mapping: ex.mapping, Reason: ex.skip, PassedOver: ex.passed}
	if i := h.tokens.index(h.tokens.presented(req.Header)); i >= 0 {
		rep.Auth = fmt.Sprintf("token %d of %d", i+1, h.tokens.count())
	}
	if herr != nil {
		// the precise reason, also where a live 401/404 answers with the
		// bare status text
		rep.Status, rep.Error = herr.status, herr.reason
	} else if len(reply) > 0 && json.Valid(reply) {
		rep.Reply = reply
	}
	for _, a := range []*verify.Answer{ex.answer, ex.ack} {
		if a != nil && herr == nil {
			rep.Answer = &dryRunAnswer{What: a.What, Status: a.Status, ContentType: a.Header.Get("Content-Type"), Body: string(a.Body)}
		}
	}
	for i := range dry.items {
		rep.Actions = append(rep.Actions, newDryRunAction(&dry.items[i]))
	}
	enc := json.NewEncoder(safetext.JSONWriter(out)) // no control or bidi character raw: the terminal shows what is there
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rep); err != nil {
		return false, err
	}
	return rep.Status >= 400, nil
}

// prepareDryRun makes a handler config safe to run offline: no spool, no
// cluster (no connection to its engine: a dry run claims no idempotency
// key, shares no failure and queues nothing where the live nodes would
// see it), no event log, a random token (and gateway token) when their
// placeholders are unset, and
// random signing secrets where a secret's variable is unset (noted on
// notes for the mappings that could answer hookPath: such a mapping then
// refuses every signature). A stand-in secret is written to a file in
// dir and put in the config as its {file.…} placeholder, so that the
// config still holds no literal secret (and provisioning warns about none
// the operator did not write). It returns the token to present.
func prepareDryRun(h *Handler, hookPath, dir string, notes io.Writer) (string, error) {
	h.Spool = nil
	if h.ClusterRaw != nil {
		fmt.Fprintln(notes, "note: the cluster is not contacted in a dry run (no idempotency key claimed, no failure shared, nothing queued)")
		h.ClusterRaw = nil
	}
	h.Events = &EventsConfig{Disabled: true} // a dry run is no event
	n := 0
	standIn := func(value string) (string, error) {
		n++
		f := filepath.Join(dir, fmt.Sprintf("secret-%d", n))
		if err := os.WriteFile(f, []byte(value), 0o600); err != nil {
			return "", err
		}
		return "{file." + f + "}", nil
	}
	fill := func(t *string) error {
		if *t == "" || secret.Expand(*t) != "" {
			return nil
		}
		var err error
		*t, err = standIn(randomToken())
		return err
	}
	if len(h.tokenValues()) == 0 {
		var err error
		if h.Token, err = standIn(randomToken()); err != nil {
			return "", err
		}
	}
	for _, t := range append([]*string{&h.Token, &h.GatewayToken}, ptrs(h.Tokens)...) {
		if err := fill(t); err != nil {
			return "", err
		}
	}
	token := secret.Expand(h.tokenValues()[0])
	for i := range h.Mappings {
		v := h.Mappings[i].Verify
		if v == nil {
			continue
		}
		cfg := *v
		cfg.Secrets, cfg.PublicKeys = slices.Clone(v.Secrets), slices.Clone(v.PublicKeys)
		info, _ := verify.Lookup(cfg.Scheme)
		secrets := append([]*string{&cfg.VerifyToken, &cfg.ClientState, &cfg.EncryptKey}, ptrs(cfg.Secrets)...)
		keys := ptrs(cfg.PublicKeys)
		for _, p := range append(secrets, keys...) {
			if *p == "" || secret.Expand(*p) != "" {
				continue
			}
			if mp := strings.Trim(h.Mappings[i].MatchPath, "/"); mp == "" || strings.HasSuffix(strings.Trim(hookPath, "/"), mp) {
				fmt.Fprintf(notes, "note: %s is not set; signatures for mapping %q cannot verify in this dry run\n", *p, h.Mappings[i].ID)
			}
			value := randomToken()
			switch {
			case slices.Contains(keys, p):
				value = standInPublicKey(info.Family)
			case info.Family == verify.FamilyStandard:
				value = "whsec_" + base64.StdEncoding.EncodeToString([]byte(value))
			}
			var err error
			if *p, err = standIn(value); err != nil {
				return "", err
			}
		}
		h.Mappings[i].Verify = &cfg
	}
	if _, err := parseGatewayAddr(caddy.NewReplacer().ReplaceKnown(h.Gateway, "")); err != nil {
		// unset (or e.g. "unix/{env.GATEWAY_SOCKET}" with the variable unset)
		h.Gateway = "unix//nonexistent/dry-run.sock" // never dialled
	}
	return token, nil
}

// ptrs returns pointers to the elements of s.
func ptrs(s []string) []*string {
	out := make([]*string, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

// dryRunLogger is the handler's logger during a dry run: each warning
// (and error) on one line of notes, without stack traces; with debug,
// everything down to debug level, with stack traces from warnings up.
// Its level can be raised to silence it once the handler is set up.
func dryRunLogger(notes io.Writer, debug bool) (*zap.Logger, zap.AtomicLevel) {
	enc := zapcore.NewConsoleEncoder(zapcore.EncoderConfig{
		LevelKey: "level", MessageKey: "msg", NameKey: "logger", StacktraceKey: "stack",
		EncodeLevel: func(l zapcore.Level, pe zapcore.PrimitiveArrayEncoder) { pe.AppendString(l.String() + ":") },
		EncodeName:  zapcore.FullNameEncoder, ConsoleSeparator: " ", LineEnding: "\n",
	})
	level := zap.NewAtomicLevelAt(zapcore.WarnLevel)
	var opts []zap.Option
	if debug {
		level.SetLevel(zapcore.DebugLevel)
		opts = append(opts, zap.AddStacktrace(zapcore.WarnLevel))
	}
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(notes), level), opts...), level
}

// standInPublicKey is a fresh public key of a provider family (Ed25519,
// hex; ECDSA P-256, base64 DER), for a public_key placeholder that is not
// set: signatures then never verify, as with a stand-in secret.
func standInPublicKey(f verify.Family) string {
	if f == verify.FamilyECDSA {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err == nil {
			if der, err := x509.MarshalPKIXPublicKey(&k.PublicKey); err == nil {
				return base64.StdEncoding.EncodeToString(der)
			}
		}
	}
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	return hex.EncodeToString(pub)
}

// randomToken returns a fresh 64-hex-digit token.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// readPayload reads the body file ("" = empty, "-" = stdin).
func readPayload(path string) ([]byte, error) {
	switch path {
	case "":
		return nil, nil
	case "-":
		return io.ReadAll(os.Stdin)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--payload: %w", err)
	}
	return b, nil
}

// loadHooksConfig loads the config as caddy run does (Caddy's own
// loader: --config, else ./Caddyfile; the Caddyfile adapter for a
// Caddyfile name or --adapter caddyfile) and returns the JSON of its
// hooks handler (the one with base path base when there are several).
func loadHooksConfig(file, adapter, base string) (json.RawMessage, error) {
	b, file, _, err := caddycmd.LoadConfig(file, adapter)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, errors.New("no config: give --config <file>, or run it where ./Caddyfile is")
	}
	var cfg any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var found []map[string]any
	findHooksHandlers(cfg, &found)
	var bases []string
	for _, hc := range found {
		p, _ := hc["path"].(string)
		if p == "" {
			p = defaultPath
		}
		bases = append(bases, p)
		if base != "" && strings.TrimRight(p, "/") == strings.TrimRight(base, "/") {
			return json.Marshal(hc)
		}
	}
	switch {
	case len(found) == 0:
		return nil, fmt.Errorf("%s has no hooks handler", file)
	case base != "":
		return nil, fmt.Errorf("--base %s: no hooks handler with that path (have %s)", base, strings.Join(bases, ", "))
	case len(found) > 1:
		return nil, fmt.Errorf("%s has %d hooks handlers (%s); choose one with --base", file, len(found), strings.Join(bases, ", "))
	}
	return json.Marshal(found[0])
}

// findHooksHandlers collects every object with "handler": "hooks".
func findHooksHandlers(v any, found *[]map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		if x["handler"] == "hooks" {
			*found = append(*found, x)
			return
		}
		for _, e := range x {
			findHooksHandlers(e, found)
		}
	case []any:
		for _, e := range x {
			findHooksHandlers(e, found)
		}
	}
}

// dryRunSink records the prepared actions instead of dispatching them and
// answers as the gateway would (runId = the action's event id).
type dryRunSink struct {
	items   []prepared
	dropped int
}

// deliver implements sink.
func (s *dryRunSink) deliver(_ context.Context, items []prepared, dropped int, _ netip.Addr) (int, []byte, *hookError) {
	s.items, s.dropped = items, dropped
	ids := make([]string, len(items))
	for i := range items {
		ids[i] = items[i].eventID
	}
	return http.StatusOK, composeReply(items, ids, "", dropped), nil
}
