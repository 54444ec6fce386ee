package caddyhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/internal/listenguard"
	"github.com/caddyhook/caddyhook/internal/lockout"
	"github.com/caddyhook/caddyhook/internal/secret"
	"github.com/caddyhook/caddyhook/internal/verify"
)

func init() {
	caddy.RegisterModule(new(Handler))
}

// CaddyModule returns the Caddy module information. (A pointer receiver:
// Caddy asks a running handler for it, e.g. as the origin of an event, and
// a value receiver would copy the whole handler while Cleanup may write it.)
func (*Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.hooks",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision fills in the defaults, expands the secrets, compiles the
// policy, the gateway address and the mappings, and takes this handler's
// share of the state kept across reloads (lockout table, idempotency
// cache, spool; see sharedPool). Range and consistency checks are
// Validate's, which Caddy runs next; everything taken here is given back
// by Cleanup, which Caddy runs when Provision or Validate fails and when
// the config is replaced.
func (h *Handler) Provision(ctx caddy.Context) error {
	if h.logger == nil { // a dry run brings its own
		h.logger = ctx.Logger()
	}
	gatewayLogs := new(logBudget) // the gateway failures' and the cluster warnings'
	h.enabled = h.Enabled == nil || *h.Enabled
	if !h.enabled {
		return nil
	}
	if err := secret.CheckSet(h.secretFields()); err != nil {
		return err // every empty one at once (caddy validate)
	}
	repl := caddy.NewReplacer()
	gwToken, err := secret.Required("gateway_token", h.GatewayToken)
	if err != nil {
		return err
	}
	if h.tokens, err = newTokenChecker(h.tokenValues(), h.TokenHeaders, repl, gwToken); err != nil {
		return err
	}
	h.rejects = &rejectionLog{logger: h.logger, tokens: h.tokens}
	h.warnLiteralSecrets(h.logger)
	addrs, err := checkClientAddressSource(ctx)
	if err != nil {
		return err
	}
	h.base = cleanBasePath(h.Path)
	h.fillDefaults()
	if h.bodies, err = newBodyReads(&h.UnauthenticatedBodies, &h.BodyTimeout); err != nil {
		return err
	}
	if err := h.provisionModes(); err != nil {
		return err
	}
	pc := policyConfig{
		Forward:                   h.forward,
		Agents:                    h.Agents,
		AllowRequestSessionKey:    h.AllowRequestSessionKey,
		AllowedSessionKeyPrefixes: h.AllowedSessionKeyPrefixes,
		DefaultSessionKey:         h.DefaultSessionKey, // as written: never a placeholder (newPolicy)
		AllowedModels:             h.AllowedModels,
		Channels:                  h.Channels,
	}
	if h.AllowedAgentIDs != nil {
		pc.AllowedAgentIDs, pc.AllowedAgentIDsSet = *h.AllowedAgentIDs, true
	}
	if h.policy, err = newPolicy(pc); err != nil {
		return err
	}
	if err := h.Spool.checkCluster(h.ClusterRaw != nil, h.Gateway); err != nil {
		return err
	}
	var addr gatewayAddr
	if h.Gateway != "" || !h.Spool.noGateway() {
		if addr, err = parseGatewayAddr(repl.ReplaceKnown(h.Gateway, "")); err != nil {
			return err
		}
	}
	h.gateway = newGatewayClient(addr, h.GatewayPrefix, gwToken, time.Duration(h.GatewayTimeout), h.GatewayForwardClientIP)
	if addr.network != "" {
		h.gateway.probe(ctx, h.logger, h.Spool != nil)
	}
	h.gateway.setWaitTimeout(time.Duration(h.GatewayWaitTimeout))

	if h.router, err = newRouter(routerConfig{mappings: h.Mappings, presets: h.Presets, maxBody: h.MaxBody,
		celCostLimit: h.CELCostLimit, base: h.base, forward: h.forward, allowRequestKey: h.AllowRequestSessionKey,
		policy: h.policy, tokens: h.tokens, repl: repl, verifyEnv: h.verifyEnv, logger: h.logger,
		transforms: newTransformSet(h.TransformsRoot, h.TransformsDir, time.Duration(h.TransformTimeout), h.TransformMaxMemory, &h.held),
	}); err != nil {
		return err
	}
	h.forwarder = newForwarder(h.base, h.gateway, h.router.signatureHeaders(), h.tokens.headerNames(), h.Spool != nil)
	identity := h.handlerIdentity(ctx, addr, gwToken)
	ls := lockoutSettings{count: h.AuthFailures.Count, window: time.Duration(h.AuthFailures.Window),
		lockFor: time.Duration(h.Lockout), v6bits: h.IPv6Prefix, slots: h.LockoutTableSize}
	table, tableKey, err := holdLockoutTable(&h.held, identity, ls)
	if err != nil {
		return err
	}
	idemCache, err := holdIdempotencyCache(&h.held, identity, time.Duration(h.IdempotencyTTL))
	if err != nil {
		return err
	}
	if h.metrics, err = holdMetrics(&h.held, ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	h.addrs = addrs.counting(h.metrics, h.logger)
	h.access = newAccessLog(ctx, h.tokens, h.router.signatureHeaders())
	h.lockout = newLockoutGuard(table, tableKey, identity, ls, h.base, h.metrics, newLockoutEvents(ctx), h.logger)
	if err := h.provisionCluster(ctx); err != nil {
		return err
	}
	h.idem = &idempotencyCheck{Cache: idemCache, headers: h.idemHeaders, cluster: h.cluster.claims(), logs: gatewayLogs, logger: h.logger}
	h.outcomes = newOutcomeRelay(h.cluster, h.logger)
	h.dispatcher = &dispatcher{gateway: h.gateway, metrics: h.metrics, logs: gatewayLogs, logger: h.logger, outcomes: h.outcomes}
	h.sink = syncSink{h.dispatcher}
	switch {
	case h.Spool == nil:
	case h.Spool.Cluster:
		h.spooling, err = openClusterSpool(ctx, &h.held, h.Spool, h.cluster, gatewaySender{h.dispatcher}, addr.network != "", h.gateway, h.metrics, h.logger)
		h.cluster.checkPayload(h.router.largestBodyLimit(), h.logger)
	default:
		h.spooling, err = openLocalSpool(ctx, &h.held, h.Spool, gatewaySender{h.dispatcher}, h.gateway, h.metrics, h.logger)
	}
	if err != nil {
		return err
	}
	if h.spooling.sink != nil {
		h.sink = h.spooling.sink
	}
	if err := h.provisionEvents(ctx); err != nil {
		return err
	}
	if h.view, err = newClusterView(h.cluster, h.events, h.spooling.report, h.base, h.logger); err != nil {
		return err
	}
	if err := listenguard.Guard(ctx); err != nil {
		return err
	}
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if hosts := onlyHosts(srv); hosts != nil {
		h.logger.Warn("the site answers only the host names it names: a request for another Host on its listener "+
			"(a tunnel or a load balancer that rewrites Host) gets Caddy's empty 200 and is never dispatched; "+
			"the gateway answers every Host: give the site a host-less address (http://:PORT) or add a site for the other hosts",
			zap.Strings("hosts", hosts), zap.Strings("listen", srv.Listen))
	}
	registerAdmin(&h.held, &adminView{base: h.base, server: srv, lockout: h.lockout, idem: h.idem, bodies: h.bodies,
		cluster: h.cluster, spool: h.spooling.ops, spoolDir: h.spooling.dir, events: h.events, outcomes: h.outcomes,
		sink: h.sink, view: h.view, logger: h.logger})
	return nil
}

// provisionCluster loads the cluster engine and opens this handler's
// namespace (openCluster): its parameters are the namespace (from the
// base path unless the engine sets one), the longest lock, the
// idempotency TTL and, with `spool cluster`, the queue's settings.
func (h *Handler) provisionCluster(ctx caddy.Context) error {
	if h.ClusterRaw == nil {
		return nil
	}
	p := cluster.Params{
		Name:           cluster.NameFromPath(h.base),
		LockTTL:        time.Duration(h.AuthFailures.Window) + h.lockout.Policy().LockFor,
		IdempotencyTTL: time.Duration(h.IdempotencyTTL),
		Logger:         h.logger.Named("cluster"),
	}
	if sc := h.Spool; sc != nil && sc.Cluster {
		p.Queue = &cluster.QueueParams{MaxBytes: sc.MaxBytes, MaxAge: time.Duration(sc.MaxAge),
			RetryInitial: time.Duration(sc.RetryInitial), RetryMax: time.Duration(sc.RetryMax), MaxIdentical: sc.MaxIdenticalErrors}
	}
	key, err := engineKey(h.ClusterRaw, p) // before LoadModule clears ClusterRaw
	if err != nil {
		return err
	}
	mod, err := ctx.LoadModule(h, "ClusterRaw")
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	// a claim's lease: the longest dispatch (a spooled one never waits
	// for its run), beyond the engine's own timeout
	// and a copy's wait for the first request's reply: its dispatch, a
	// gateway call, or with a spool a write into it (0: within the
	// engine's timeout)
	lease, wait := time.Duration(h.GatewayWaitTimeout), time.Duration(h.GatewayTimeout)
	if h.Spool != nil {
		lease, wait = time.Duration(h.GatewayTimeout), 0
	}
	h.cluster, err = openCluster(ctx, &h.held, mod, key, p, h.lockout, h.metrics, lease, wait)
	return err
}

// provisionEvents opens (or shares, across a reload) the handler's event
// log and has the outcome relay apply the outcomes of its events.
func (h *Handler) provisionEvents(ctx caddy.Context) error {
	var listen []string
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
		listen = slices.Sorted(slices.Values(srv.Listen))
	}
	rec, err := newEventRecorder(h.Events, eventsSetup{listen: listen, base: h.base, sigHeaders: h.router.signatureHeaders(),
		spooled: h.Spool != nil, held: &h.held, metrics: h.metrics, logger: h.logger, lockout: h.lockout, tokens: h.tokens, idem: h.idem,
		policy: h.policy})
	if err != nil || rec == nil {
		return err
	}
	h.events = rec
	return h.outcomes.attach(rec.eventLog())
}

// tokenValues lists the configured token values (placeholders unexpanded).
func (h *Handler) tokenValues() []string {
	var out []string
	if h.Token != "" {
		out = append(out, h.Token)
	}
	return append(out, h.Tokens...)
}

// secretFields are the config's values that hold a secret, or a
// placeholder that must expand to something, named as the errors name
// them: the hook tokens, gateway_token, the gateway address, every
// mapping's verify secrets, and the cluster engine's (cluster.Secrets,
// read from its config without provisioning it).
func (h *Handler) secretFields() []secret.Field {
	raws := h.tokenValues()
	var out []secret.Field
	for i, raw := range raws {
		name := "token"
		if len(raws) > 1 {
			name = fmt.Sprintf("token %d of %d", i+1, len(raws))
		}
		out = append(out, secret.Field{Name: name, Raw: raw})
	}
	out = append(out, secret.Field{Name: "gateway_token", Raw: h.GatewayToken}, secret.Field{Name: "gateway", Raw: h.Gateway, Each: true})
	for _, m := range h.Mappings {
		if m.Verify == nil {
			continue
		}
		for j, s := range m.Verify.Secrets {
			out = append(out, secret.Field{Name: fmt.Sprintf("mapping %s: verify secret %d", m.ID, j+1), Raw: s})
		}
		for _, f := range verifySecretWords(m.Verify) {
			out = append(out, secret.Field{Name: fmt.Sprintf("mapping %s: verify %s", m.ID, f.word), Raw: *f.value})
		}
	}
	var engine struct {
		Engine string `json:"engine"`
	}
	if h.ClusterRaw == nil || json.Unmarshal(h.ClusterRaw, &engine) != nil {
		return out // the engine's own loading names what is wrong
	}
	info, err := caddy.GetModule(cluster.Namespace + "." + engine.Engine)
	if err != nil {
		return out
	}
	mod := info.New()
	if sf, ok := mod.(cluster.Secrets); ok && json.Unmarshal(h.ClusterRaw, mod) == nil {
		for _, f := range sf.SecretFields() {
			out = append(out, secret.Field{Name: f.Name, Raw: f.Raw, Each: f.Each})
		}
	}
	return out
}

// warnLiteralSecrets logs, once per provision, every secret written into
// the config as a literal. One rule for all secrets, in a Caddyfile or
// JSON: a literal is accepted with this warning, because Caddy keeps the
// loaded config as it is (the admin endpoint's /config/ and autosave.json
// show it in clear), while {env.…} and {file.…} keep only the placeholder.
func (h *Handler) warnLiteralSecrets(logger *zap.Logger) {
	for _, f := range h.secretFields() {
		if !f.Each && isLiteralSecret(f.Raw) && !strings.HasPrefix(f.Name, "cluster ") { // the engine warns about its own
			logger.Warn(secret.LiteralWarning, zap.String("field", f.Name))
		}
	}
}

// isLiteralSecret reports a non-empty secret that holds no placeholder.
func isLiteralSecret(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && !verify.IsSecretPlaceholder(s) && !secret.HasPlaceholder(s)
}

// handlerIdentity is everything that makes two hooks handlers different
// as far as their lockout table and idempotency cache go: the server they
// belong to (its listener addresses), the base path, the gateway they
// deliver to (address, prefix, credentials) and the policy that shapes
// what they send. Two handlers with the same identity would send the same
// request to the same gateway for the same input, so an idempotent replay
// answered from either is the answer the other would give; a handler with
// another gateway or policy gets state of its own. The hook token is left
// out on purpose, so that rotating it keeps the state.
//
// Two sites on one server (told apart only by their host names) with the
// same base path, gateway and policy do share their state: they guard the
// same gateway in the same way. Give them different base paths to keep
// them apart.
func (h *Handler) handlerIdentity(ctx caddy.Context, gateway gatewayAddr, gatewayToken string) string {
	var listen []string
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok && srv != nil {
		listen = slices.Sorted(slices.Values(srv.Listen))
	}
	policy, _ := json.Marshal(struct {
		Agents                    []string  `json:"a"`
		AllowedAgentIDs           *[]string `json:"b"`
		DefaultSessionKey         string    `json:"c"`
		AllowRequestSessionKey    bool      `json:"d"`
		AllowedSessionKeyPrefixes []string  `json:"e"`
		AllowedModels             []string  `json:"f"`
		Channels                  []string  `json:"g"`
	}{h.Agents, h.AllowedAgentIDs, h.DefaultSessionKey, h.AllowRequestSessionKey,
		h.AllowedSessionKeyPrefixes, h.AllowedModels, h.Channels})
	sum := sha256.Sum256(fmt.Appendf(nil, "%q|%q|%q|%q|%q|%s|%t",
		strings.Join(listen, ","), h.base, gateway.network+"/"+gateway.address, h.gateway.prefixed(""),
		gatewayToken, policy, h.GatewayForwardClientIP))
	return hex.EncodeToString(sum[:12])
}

// cleanBasePath is the base path without trailing slashes (default
// /hooks); validateBasePath says whether it is acceptable.
func cleanBasePath(p string) string {
	if p == "" {
		return defaultPath
	}
	return strings.TrimRight(p, "/")
}

// validateBasePath refuses a relative path, "/" and anything but a plain path.
func validateBasePath(p string) error {
	switch {
	case p == "":
		return nil
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("path: %q must start with /", p)
	case strings.TrimRight(p, "/") == "":
		return fmt.Errorf("path: / is not allowed; use a dedicated base path such as /hooks")
	case strings.ContainsAny(p, "?#{}"):
		return fmt.Errorf("path: %q must be a plain path", p)
	}
	return nil
}

// fillDefaults sets every unset size, duration and limit to its default.
func (h *Handler) fillDefaults() {
	if h.MaxBody == 0 {
		h.MaxBody = defaultMaxBody
	}
	if h.GatewayPrefix == "" {
		h.GatewayPrefix = defaultGatewayPrefix
	}
	if h.GatewayTimeout == 0 {
		h.GatewayTimeout = caddy.Duration(defaultGatewayTimeout)
	}
	if h.GatewayWaitTimeout == 0 {
		h.GatewayWaitTimeout = caddy.Duration(max(defaultWaitTimeout, time.Duration(h.GatewayTimeout)))
	}
	af := AuthFailures{Count: defaultAuthFailures, Window: caddy.Duration(defaultAuthWindow)}
	if h.AuthFailures != nil {
		if h.AuthFailures.Count != 0 {
			af.Count = h.AuthFailures.Count
		}
		if h.AuthFailures.Window != 0 {
			af.Window = h.AuthFailures.Window
		}
	}
	h.AuthFailures = &af
	if h.IPv6Prefix == 0 {
		h.IPv6Prefix = defaultIPv6Prefix
	}
	if h.LockoutTableSize == 0 {
		h.LockoutTableSize = lockout.DefaultSlots
	}
	if h.IdempotencyTTL == 0 {
		h.IdempotencyTTL = caddy.Duration(defaultIdempotencyTTL)
	}
}

// Dispatch modes and wrapping sides.
const (
	modeRender  = "render"
	modeForward = "forward"
	wrapByEdge  = "edge"
	wrapByGW    = "gateway"
)

// provisionModes checks mode, wrap and the idempotency headers.
func (h *Handler) provisionModes() error {
	switch h.Mode {
	case "", modeRender:
	case modeForward:
		h.forward = true
	default:
		return fmt.Errorf("mode: %q must be render or forward", h.Mode)
	}
	switch h.Wrap {
	case "":
		h.wrapEdge = !h.forward
	case wrapByEdge, wrapByGW:
		h.wrapEdge = h.Wrap == wrapByEdge
	default:
		return fmt.Errorf("wrap: %q must be edge or gateway", h.Wrap)
	}
	h.idemHeaders = []string{"Idempotency-Key"}
	for _, name := range h.IdempotencyHeaders {
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, " \t:\r\n") {
			return fmt.Errorf("idempotency_headers: %q is not a header name", name)
		}
		if c := http.CanonicalHeaderKey(name); !slices.Contains(h.idemHeaders, c) {
			h.idemHeaders = append(h.idemHeaders, c)
		}
	}
	return nil
}

// Validate checks the ranges and the consistency of the provisioned
// configuration; every error names its field.
func (h *Handler) Validate() error {
	if !h.enabled {
		return nil
	}
	if h.gateway == nil || h.policy == nil {
		return fmt.Errorf("hooks: not provisioned")
	}
	if err := validateBasePath(h.Path); err != nil {
		return err
	}
	af := h.AuthFailures
	switch {
	case h.MaxBody < 0 || h.MaxBody > maxMappingBody:
		return fmt.Errorf("max_body: %d must be between 1 byte and 64 MiB", h.MaxBody)
	case h.GatewayTimeout < 0:
		return fmt.Errorf("gateway_timeout: must be positive")
	case h.GatewayWaitTimeout < 0:
		return fmt.Errorf("gateway_wait_timeout: must be positive")
	case h.GatewayWaitTimeout < h.GatewayTimeout:
		return fmt.Errorf("gateway_wait_timeout: %s must not be shorter than gateway_timeout (%s)", time.Duration(h.GatewayWaitTimeout), time.Duration(h.GatewayTimeout))
	case af.Count < 0 || af.Window < 0:
		return fmt.Errorf("auth_failures: count and window must be positive")
	case af.Count > lockout.MaxCount:
		return fmt.Errorf("auth_failures: count %d must be at most %d", af.Count, lockout.MaxCount)
	case time.Duration(af.Window) < time.Second || time.Duration(af.Window) > 24*time.Hour:
		return fmt.Errorf("auth_failures: window %s must be between 1s and 24h", time.Duration(af.Window))
	case h.Lockout < 0 || time.Duration(h.Lockout) > 24*time.Hour:
		return fmt.Errorf("lockout: must be between 0 and 24h")
	case h.IPv6Prefix < 16 || h.IPv6Prefix > 128:
		return fmt.Errorf("ipv6_prefix: %d must be between 16 and 128", h.IPv6Prefix)
	case h.LockoutTableSize < lockout.MinSlots || h.LockoutTableSize > lockout.MaxSlots:
		return fmt.Errorf("lockout_table_size: %d must be between %d and %d", h.LockoutTableSize, lockout.MinSlots, lockout.MaxSlots)
	case h.IdempotencyTTL < 0:
		return fmt.Errorf("idempotency_ttl: must be positive")
	}
	return nil
}

// Cleanup gives back exactly what Provision took: the handler's share of
// the lockout table, idempotency cache, spool (and its sender's
// registration) and transform cache, and the gateway's idle connections.
// It runs after a failed Provision or Validate too, so that a refused
// config leaves the running one as it was.
func (h *Handler) Cleanup() error {
	h.view.release()
	h.outcomes.release()
	h.events.release()
	h.spooling.release()
	h.lockout.release()
	h.held.release()
	if h.gateway != nil {
		h.gateway.close()
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)

// onlyHosts returns the host names srv's routes are limited to when
// srv is plain HTTP and every one of its top-level routes matches on the
// host (nil otherwise): there, a request for another host falls through
// every route to Caddy's empty 200. Over TLS another name fails the
// handshake, and Caddy redirects plain HTTP.
func onlyHosts(srv *caddyhttp.Server) []string {
	if srv == nil || len(srv.TLSConnPolicies) > 0 || len(srv.Routes) == 0 {
		return nil
	}
	var hosts []string
	for _, r := range srv.Routes {
		if len(r.MatcherSetsRaw) == 0 {
			return nil
		}
		for _, set := range r.MatcherSetsRaw {
			raw, ok := set["host"]
			if !ok {
				return nil
			}
			var hs []string
			_ = json.Unmarshal(raw, &hs)
			hosts = append(hosts, hs...)
		}
	}
	return hosts
}
