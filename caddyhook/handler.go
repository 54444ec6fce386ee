package caddyhook

import (
	"encoding/json"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/verify"
)

// Defaults of the reference gateway where the spec is silent.
const (
	defaultPath           = "/hooks"
	defaultGatewayPrefix  = "/hooks"
	defaultGatewayTimeout = 30 * time.Second // above the gateway's 15 s admission deadline
	defaultWaitTimeout    = 10 * time.Minute
	defaultMaxBody        = 256 << 10
	defaultAuthFailures   = 20
	defaultAuthWindow     = time.Minute
	defaultIPv6Prefix     = 64
	defaultIdempotencyTTL = 10 * time.Minute
)

// AuthFailures configures the per-address lockout: Count failures within
// Window lock the address.
type AuthFailures struct {
	Count  int            `json:"count,omitempty"`
	Window caddy.Duration `json:"window,omitempty"`
}

// Handler is the `hooks` HTTP handler: a hardened webhook ingress that
// authenticates, validates and routes `POST {path}/wake`, `{path}/agent`
// and mapped `{path}/<name>` requests, then dispatches the resulting
// actions to a local agent gateway.
//
// # Placeholders
//
// The handler sets these on every request it answers, for the handlers
// and logs around it (log_append, intercept's handle_response, response
// header directives, …); they never carry a token or payload content:
//
//	{http.hooks.route}    wake, agent, the id of the mapping that answered,
//	                      mapped (a custom hook name no mapping took),
//	                      challenge (a provider's endpoint handshake,
//	                      answered at the edge) or none (refused before
//	                      routing)
//	{http.hooks.mapping}  the id of the mapping that answered; empty for
//	                      wake, agent and requests no mapping took
//	{http.hooks.status}   the status the handler answered with
//	{http.hooks.reason}   why the request was refused, as the rejection log
//	                      line says it; empty on success
//	{http.hooks.event}    the event name the answering mapping's provider
//	                      gave (push, orders/create, …); empty when none
//
// # Refusals and handle_errors
//
// The handler writes every answer itself, refusals included, and returns
// no error to Caddy: a site's handle_errors routes never see a request
// under the base path. A refusal is part of the contract the sender knows
// from the gateway: its status, the gateway's {"ok":false,"error":"…"}
// body (the bare status text where the gateway answers 401, 404 or 405
// so), Retry-After with 429 and 503, Allow with 405. An error route would
// answer something else (a page, a redirect, a 2xx), and the sender could
// no longer tell a refusal as it tells the gateway's; and the handler
// records each refusal once it is written (the lockout counts an
// authentication failure, the event log, the metrics, the placeholders
// above, the access log), which an error answered elsewhere would skip.
// To add to what a refused request gets, use those placeholders
// ({http.hooks.status}, {http.hooks.reason}) with log_append, header
// directives or intercept's handle_response around the handler.
//
// # Events
//
// hooks_lockout is emitted on the events app (when the config has one)
// each time an address is locked out; its data: "address", "until"
// (RFC 3339, UTC), "until_unix" and "path" (the handler's base path).
//
// # Caddyfile
//
//	hooks [<path>] {
//	    path                         <base path>
//	    token                        <hook token>...   # repeatable: several are accepted
//	    token_headers                <header>...
//	    gateway                      unix//<socket> | <loopback host:port>
//	    gateway_token                <token>
//	    gateway_prefix               <path>
//	    gateway_timeout              <duration>
//	    gateway_wait_timeout         <duration>
//	    mode                         render|forward
//	    wrap                         edge|gateway
//	    idempotency_headers          <header>...
//	    gateway_forward_client_ip    [true|false]
//	    max_body                     <size>
//	    auth_failures                <count> [<window>]
//	    lockout                      <duration>
//	    unauthenticated_bodies       [<max> [<timeout>]] [{ per_address <n>, per_prefix /<bits> <n>... }]
//	    body_timeout                 <duration>
//	    lockout_table_size           <entries>
//	    ipv6_prefix                  <bits>
//	    idempotency_ttl              <duration>
//	    agents                       <id>...
//	    allowed_agent_ids            [<id>...]
//	    default_session_key          <key>
//	    allow_request_session_key    [true|false]
//	    allowed_session_key_prefixes <prefix>...
//	    allowed_models               <model>...
//	    channels                     <channel>...
//	    presets                      <preset>...       # gmail
//	    cel_cost_limit               <n>
//	    transforms_root              <dir>
//	    transforms_dir               <dir>
//	    transform_timeout            <duration>
//	    transform_max_memory         <size>
//	    enabled                      true|false
//	    mapping [<id>] {                               # repeatable
//	        match_path       <name>
//	        match_source     <source>
//	        match_expr       <CEL expression>
//	        action           agent|wake
//	        wake_mode        now|next-heartbeat
//	        name             <template>
//	        agent_id         <template>
//	        session_key      <template>
//	        message_template <template>
//	        text_template    <template>
//	        deliver          [true|false]
//	        channel          <template>
//	        to               <template>
//	        model            <template>
//	        thinking         <template>
//	        timeout_seconds  <n>
//	        allow_unsafe_external_content [true|false]
//	        for_each         <payload key>
//	        max_body         <size>
//	        transform        <module> [<export>]   # or a block: module, export
//	        verify           <provider> { secret <s>... public_key <k>... verify_token <t> ... }  # caddy hooks providers
//	        require_token    [true|false]
//	        forward          [true|false]
//	    }
//	    spool <dir> {
//	        max_bytes     <size>
//	        max_age       <duration>
//	        retry_initial <duration>
//	        retry_max     <duration>
//	        workers       <n>
//	        rate          <n>/<interval>
//	        max_identical_errors <n>
//	    }
//	    spool cluster {              # the cluster engine's replicated queue
//	        deliver       on|off
//	        fallback      <dir>|reject
//	        max_bytes, max_age, retry_initial, retry_max, workers, rate, max_identical_errors
//	    }
//	    cluster <engine> [<url>...] {  # e.g. cluster nats: see the engine's options
//	    }
//	    events off | on | {           # the event log; on by default
//	        bodies         on|off
//	        max_body       <size>
//	        max_events     <n>
//	        max_bytes      <size>
//	        retain         <duration>
//	        max_rejections <n>
//	        dir            <dir>
//	        headers        <header>...
//	    }
//	}
//
// In a mapping's templates, \n outside the {{ }} placeholders stands for a
// newline.
type Handler struct {
	// Enabled turns the endpoint on (default true). When false, requests
	// pass to the next handler untouched.
	Enabled *bool `json:"enabled,omitempty"`
	// Token is the hook token (required): at least 32 characters, at least
	// 8 distinct ones, different from GatewayToken. Placeholders such as
	// {env.HOOK_TOKEN} and {file./run/secrets/hook} are expanded. The
	// Caddyfile's token may be repeated (JSON: token and tokens, at most 8
	// in all, all different).
	Token string `json:"token,omitempty"`
	// Tokens are further hook tokens, each accepted like Token: during a
	// rotation, add the new token, move the senders, remove the old one.
	// All are compared on every request, in constant time.
	Tokens []string `json:"tokens,omitempty"`
	// TokenHeaders names further request headers that carry the hook
	// token, besides Authorization: Bearer and x-service-token (e.g.
	// x-openclaw-token, the reference gateway's own header). They are
	// redacted in logs and never seen by templates.
	TokenHeaders []string `json:"token_headers,omitempty"`
	// Path is the base path (default /hooks; / is refused); in the
	// Caddyfile also the directive's argument.
	Path string `json:"path,omitempty"`

	// Gateway is the gateway address: unix//path.sock or a loopback
	// host:port only. Required, except on a cluster edge that delivers
	// nothing (spool cluster with deliver off).
	Gateway string `json:"gateway,omitempty"`
	// GatewayToken is sent to the gateway as Bearer; it must differ from Token.
	GatewayToken string `json:"gateway_token,omitempty"`
	// GatewayPrefix is the gateway's hooks path (default /hooks).
	GatewayPrefix string `json:"gateway_prefix,omitempty"`
	// GatewayTimeout bounds one dispatch (default 30s, longer than the
	// gateway's own 15 s deadline for starting a run); beyond it the
	// sender gets 504.
	GatewayTimeout caddy.Duration `json:"gateway_timeout,omitempty"`
	// GatewayWaitTimeout bounds a dispatch whose request asks to wait for
	// the run to complete (waitForCompletion: true; the gateway answers
	// when the run ends; default 10m): the smaller of this and
	// GatewayTimeout plus the request's timeoutSeconds.
	GatewayWaitTimeout caddy.Duration `json:"gateway_wait_timeout,omitempty"`
	// GatewayForwardClientIP sends the client address as X-Forwarded-For
	// (default off: the real gateway answers 403 to forwarded headers from
	// a peer it does not trust).
	GatewayForwardClientIP bool `json:"gateway_forward_client_ip,omitempty"`

	// Mode is how hooks reach the gateway: "render" (default) resolves
	// mappings at the edge and dispatches wake/agent actions; "forward"
	// validates /wake and /agent and forwards them, and the presets, as
	// sent, for a gateway that has its own hooks config.
	Mode string `json:"mode,omitempty"`
	// Wrap says who wraps untrusted content in the external-content
	// boundary: "edge" (the default in render mode) or "gateway" (the
	// default in forward mode; the edge never wraps).
	Wrap string `json:"wrap,omitempty"`
	// IdempotencyHeaders are further headers carrying an idempotency key,
	// read in order after Idempotency-Key (e.g. x-openclaw-idempotency-key).
	IdempotencyHeaders []string `json:"idempotency_headers,omitempty"`

	// MaxBody is the request body limit in bytes (default 256 KiB; a
	// mapping may raise its own); a larger body is answered 413, a chunked
	// one is never cut short.
	MaxBody int64 `json:"max_body,omitempty"`
	// AuthFailures sets the lockout threshold: the count-th failure (at
	// most 255) within a sliding window locks the address (default 20 per
	// 1m; Caddyfile `auth_failures <count> [<window>]`).
	AuthFailures *AuthFailures `json:"auth_failures,omitempty"`
	// Lockout is how long a locked address stays locked, from the failure
	// that locked it; 0 (default) means the failure window's length.
	Lockout caddy.Duration `json:"lockout,omitempty"`
	// UnauthenticatedBodies bounds the request bodies read before the
	// request is authenticated (deliveries a provider signature must
	// authenticate): how many at once, how many per client address, how
	// many per wider IPv6 network, and how long each may take (default 256
	// at once, 8 per address, 32 per /48 and 64 per /32, 10s; Caddyfile
	// `unauthenticated_bodies [<max> [<timeout>]] { per_address <n>,
	// per_prefix /<bits> <n> }`, JSON {"max":256,"timeout":"10s",
	// "per_address":8,"per_prefix":[{"bits":48,"max":32}]}).
	UnauthenticatedBodies *UnauthenticatedBodies `json:"unauthenticated_bodies,omitempty"`
	// BodyTimeout is how long an authenticated request's body may take to
	// arrive (default 60s); a slower one is answered 408, not counted as a
	// failure. Twice the reference gateway's 30 s, so the edge reads
	// whatever the gateway would; the default 256 KiB then needs 4.4 KB/s.
	// Raise it with a large max_body.
	BodyTimeout caddy.Duration `json:"body_timeout,omitempty"`
	// LockoutTableSize is the number of addresses the lockout table holds
	// (default 2,097,152 = 64 MiB at most); the table is kept across
	// reloads with the same settings.
	LockoutTableSize int `json:"lockout_table_size,omitempty"`
	// IPv6Prefix groups IPv6 clients for the lockout (default 64).
	IPv6Prefix int `json:"ipv6_prefix,omitempty"`
	// IdempotencyTTL is how long a replay returns the first reply (default 10m).
	IdempotencyTTL caddy.Duration `json:"idempotency_ttl,omitempty"`

	// Agents lists the known agent ids; the first is the default. A
	// request's unknown agentId is refused (400, as the gateway does); an
	// id that a mapping's agent_id template makes and that is not listed
	// becomes the default.
	Agents []string `json:"agents,omitempty"`
	// AllowedAgentIDs restricts the effective agent: omitted or ["*"] = any,
	// [] (in the Caddyfile: the option without ids) = no explicit agent id
	// allowed.
	AllowedAgentIDs *[]string `json:"allowed_agent_ids,omitempty"`
	// DefaultSessionKey is used when no session key is given (default: a
	// generated hook:<uuid>). It must fit AllowedSessionKeyPrefixes, and
	// is used as written: no placeholder is expanded (not {env.*}, not
	// {file.*}: the key goes to the gateway with every run), and a key with
	// a brace is refused.
	DefaultSessionKey string `json:"default_session_key,omitempty"`
	// AllowRequestSessionKey lets payloads (and templated mapping keys,
	// transforms) set sessionKey (default off).
	AllowRequestSessionKey bool `json:"allow_request_session_key,omitempty"`
	// AllowedSessionKeyPrefixes restricts explicit session keys
	// (case-insensitive). It must include hook: when no default key is set
	// (in render mode generated keys are hook:<uuid>).
	AllowedSessionKeyPrefixes []string `json:"allowed_session_key_prefixes,omitempty"`
	// AllowedModels, when set, is the list a model override must be in
	// (default: any): provider/model refs or aliases, matched as the
	// gateway resolves models (any letter case, a trailing @<auth profile>,
	// a bare model name when one listed ref has it). List the gateway's
	// aliases you allow.
	AllowedModels []string `json:"allowed_models,omitempty"`
	// Channels is the list of accepted delivery channels (default: last
	// whatsapp telegram discord slack mattermost signal imessage msteams).
	Channels []string `json:"channels,omitempty"`

	// Mappings resolve custom hook names (`POST {path}/<name>`) to
	// actions; the first eligible match wins, configured mappings before
	// presets.
	Mappings []Mapping `json:"mappings,omitempty"`
	// Presets enables built-in mappings by name (gmail), tried after the
	// configured ones.
	Presets []string `json:"presets,omitempty"`
	// CELCostLimit bounds one CEL evaluation (default 100,000); it also
	// sets the evaluation's output and time bounds.
	CELCostLimit uint64 `json:"cel_cost_limit,omitempty"`
	// TransformsRoot is the directory transforms are confined to (default
	// hooks/transforms). In a Caddyfile a relative path (and the default)
	// is relative to the directory of the file it is written in, as
	// Caddy's import resolves one (the adapter writes it absolute); in
	// JSON, relative to Caddy's working directory.
	TransformsRoot string `json:"transforms_root,omitempty"`
	// TransformsDir is the transforms directory, inside the root (default
	// the root itself).
	TransformsDir string `json:"transforms_dir,omitempty"`
	// TransformTimeout is the time budget of one transform call (default
	// 100ms): the CPU time of its thread (on Linux; elsewhere wall-clock
	// time), so that a call on a starved CPU is not stopped for time it
	// waited, and at most ten times that of wall-clock time.
	TransformTimeout caddy.Duration `json:"transform_timeout,omitempty"`
	// TransformMaxMemory caps what one transform call may build (default 8 MiB).
	TransformMaxMemory int64 `json:"transform_max_memory,omitempty"`

	// Spool, when set, makes a 200 mean "on disk": actions are spooled and
	// delivered to the gateway at least once.
	Spool *SpoolConfig `json:"spool,omitempty"`

	// Events configures the event log (on by default, bodies off).
	Events *EventsConfig `json:"events,omitempty"`

	// ClusterRaw, when set, shares the lockout, the idempotency keys and
	// (with `spool cluster`) a replicated queue with the other nodes of a
	// cluster engine: a module of the namespace http.handlers.hooks.cluster
	// chosen by its "engine" key (nats).
	ClusterRaw json.RawMessage `json:"cluster,omitempty" caddy:"namespace=http.handlers.hooks.cluster inline_key=engine"`

	// What Provision compiles and takes; the request path only reads it.
	// Each concern owns its state and methods; the Handler composes them
	// and runs a request through them (serve.go).
	enabled  bool
	forward  bool   // mode forward
	wrapEdge bool   // the edge wraps untrusted content
	base     string // the base path, cleaned
	// idemHeaders are the canonical idempotency header names, in order.
	idemHeaders []string
	logger      *zap.Logger
	// verifyEnv is what the verifiers may use (their HTTP client for
	// certificates, key sets and SNS confirmations); the zero value is
	// verify's own. Tests set a client that reaches their own servers.
	verifyEnv verify.Env

	addrs     clientAddressCheck // the client address, the lockout's key (clientaddr.go)
	tokens    *tokenChecker      // the hook tokens (tokens.go)
	lockout   *lockoutGuard      // the lockout accounting (lockout.go)
	bodies    *bodyReads         // the body reads and their slots (bodyread.go)
	router    *router            // mappings, signatures, body limits (mapping_compile.go, signature.go, route.go)
	forwarder *forwarder         // forward mode's requests (forward.go, forward_headers.go)
	policy    *policy            // agents, session keys, models, channels (policy.go)
	idem      *idempotencyCheck  // replays answered with the first reply (idempotency.go)
	gateway   *gatewayClient     // the gateway protocol (gateway.go)
	// dispatcher sends to the gateway (dispatch.go); sink is where a
	// request's prepared actions go: the dispatcher now, the spool or
	// the cluster queue (spool_sink.go, cluster_queue.go).
	dispatcher *dispatcher
	sink       sink
	metrics    *hookMetrics   // metrics.go
	access     *accessLog     // the access log entry of a request with a token (accesslog.go)
	rejects    *rejectionLog  // the rejection log lines (log.go)
	events     *eventRecorder // the event log; nil when off (eventlog.go)
	outcomes   *outcomeRelay  // dispatch outcomes to the event logs (outcome.go)
	cluster    *clusterState  // nil without a cluster engine (cluster_engine.go)
	view       *clusterView   // the cluster-wide view, from this node (cluster_view.go)

	spooling spoolSetup // the spool's sink, registrations and operations (spool_sink.go, cluster_queue.go)
	held     poolHold   // what this handler holds in sharedPool
}
