// Package importcmd is `caddy hooks import`: it translates the reference
// gateway's own config (openclaw.json, JSON5) into a Caddyfile that fronts
// that gateway with the same hooks. Every value reaches the file through
// the one token writer of internal/cftoken; whether the edge accepts a
// value is asked of the edge itself (Edge, which caddyhook implements),
// so the generated file always loads.
package importcmd

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/spf13/cobra"
	"github.com/titanous/json5"

	"github.com/caddyhook/caddyhook/internal/cftoken"
)

// Command builds `caddy hooks import`: a Caddyfile that fronts an
// existing reference gateway with the same hooks, from the gateway's own
// JSON5 config, checked against edge.
func Command(edge Edge) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import [--site ADDRESS] [--gateway HOST:PORT] [--mode forward|render] <openclaw.json>",
		Short: "Writes a Caddyfile that fronts an existing agent gateway with the same hooks",
		Long: `
Reads the agent gateway's config (openclaw.json, JSON5) and prints to stdout a
complete Caddyfile that puts caddyhook in front of that gateway with the same
hooks: base path, the gateway's presets and mappings, its session and agent
policy, its body limits, header aliases (x-openclaw-token,
x-openclaw-idempotency-key), and the gateway's address (--gateway, else
127.0.0.1 and the config's gateway.port, else 18789).

The default --mode forward leaves mapping, templates, transforms and content
wrapping to the gateway: the edge authenticates, limits and validates, then
forwards the sender's body. --mode render ports the mappings themselves, so
the edge renders them and wraps content (for logic that must run at the edge).

Secrets are never copied: the public token is {env.HOOK_TOKEN}, the gateway's
hooks token {env.OPENCLAW_HOOKS_TOKEN}. The site address is --site, else the
HOOKS_SITE environment variable when Caddy adapts the file (default
http://:8080: every host name on port 8080, as the gateway answers whatever
Host a tunnel or load balancer sends; a host name, such as
hooks.example.com, serves that name only, over HTTPS).

Stderr lists what must change on the gateway side, if anything, and every key
that could not be ported, with the reason.
`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var o Options
			f := cmd.Flags()
			o.Site, _ = f.GetString("site")
			o.Gateway, _ = f.GetString("gateway")
			o.Mode, _ = f.GetString("mode")
			cmd.SilenceUsage = true
			return Run(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o, edge)
		},
	}
	f := cmd.Flags()
	f.String("site", "", "Site address of the generated site block (default: {$HOOKS_SITE:http://localhost:8080})")
	f.String("gateway", "", "Gateway address host:port (default: 127.0.0.1 and the config's gateway.port, else 18789)")
	f.String("mode", ModeForward, "forward (the gateway maps) or render (the edge maps)")
	return cmd
}

// Import defaults: the reference gateway's port and fixed body limit, the
// environment variables the generated file reads.
const (
	referenceGatewayPort = 18789
	referenceMaxBody     = 256 << 10
	// defaultImportSite names no host: the site answers every Host on
	// its listener, as the gateway does (a tunnel or load balancer that
	// rewrites Host must not get Caddy's empty 200 for an unnamed host)
	defaultImportSite = "http://:8080"
	// the reference gateway's defaults, and words of its config
	referencePath         = "/hooks"
	referenceDefaultAgent = "main"
	channelLast           = "last"
	routeWake, routeAgent = "wake", "agent"
)

// The environment variables the generated file reads, and the modes.
const (
	SiteEnv         = "HOOKS_SITE"
	HookTokenEnv    = "HOOK_TOKEN"
	GatewayTokenEnv = "OPENCLAW_HOOKS_TOKEN"
	ModeForward     = "forward" // the gateway maps (the edge's mode forward)
	ModeRender      = "render"  // the edge maps
)

// Gmail body allowance of the reference gateway: 100 messages of
// 3 × maxBytes (JSON escaping) + 8 KiB, capped at 32 MiB, never below the
// normal limit; maxBytes defaults to 20,000.
const (
	gmailDefaultMaxBytes  = 20000
	gmailBatchMessages    = 100
	gmailEscapingFactor   = 3
	gmailPerMessageBytes  = 8192
	gmailMaxBodyCeiling   = 32 << 20
	referenceGmailPreset  = "gmail"
	referenceGmailPathKey = "gmail"
)

// Options are the flags of `caddy hooks import`.
type Options struct {
	Site, Gateway, Mode string
}

// Run reads file and writes the Caddyfile to out and the notes to notes.
func Run(out, notes io.Writer, file string, o Options, edge Edge) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	res, err := Translate(src, abs, o, edge)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if _, err := io.WriteString(out, res.Caddyfile); err != nil {
		return err
	}
	for _, n := range res.Notes {
		if _, err := fmt.Fprintln(notes, n.String()); err != nil {
			return err
		}
	}
	return nil
}

// noteKind sorts the notes printed on stderr.
type noteKind int

const (
	noteGateway   noteKind = iota // the operator must change the gateway's config
	noteNotPorted                 // a key the Caddyfile cannot carry
	noteInfo                      // how the generated file behaves
)

// Note is one line on stderr.
type Note struct {
	kind noteKind
	key  string // the gateway config key, dotted
	text string
}

// String formats the note as printed, unprintable runes escaped.
func (n Note) String() string {
	prefix := map[noteKind]string{noteGateway: "gateway side", noteNotPorted: "not ported", noteInfo: "note"}[n.kind]
	if n.key == "" {
		return prefix + ": " + cftoken.PrintableText(n.text)
	}
	return prefix + ": " + cftoken.PrintableText(n.key) + ": " + cftoken.PrintableText(n.text)
}

// Result is the generated Caddyfile and its notes.
type Result struct {
	Caddyfile string
	Notes     []Note
}

// importer holds one translation.
type importer struct {
	o        Options
	edge     Edge
	file     string // absolute path of the gateway config
	cfg      map[string]any
	hooks    map[string]any
	notes    []Note
	base     string         // hooks.path as the edge's base path
	body     []cftoken.Node // the hooks block: options, then the mappings
	mappings []cftoken.Node
	check    Checker // mappings under the policy the generated file compiles to
}

// note records a stderr note.
func (im *importer) note(kind noteKind, key, format string, args ...any) {
	im.notes = append(im.notes, Note{kind: kind, key: key, text: fmt.Sprintf(format, args...)})
}

// Translate translates a gateway config (JSON5) into a Caddyfile that
// edge accepts. file is the config's absolute path (for the header and
// transforms).
func Translate(src []byte, file string, o Options, edge Edge) (Result, error) {
	switch o.Mode {
	case "":
		o.Mode = ModeForward
	case ModeForward, ModeRender:
	default:
		return Result{}, fmt.Errorf("--mode: %q must be forward or render", o.Mode)
	}
	var raw any
	if err := json5.Unmarshal(src, &raw); err != nil {
		return Result{}, fmt.Errorf("not valid JSON5: %w", err)
	}
	cfg, ok := raw.(map[string]any)
	if !ok {
		return Result{}, errors.New("the config must be a JSON5 object")
	}
	im := &importer{o: o, edge: edge, file: file, cfg: cfg}
	if err := im.translate(); err != nil {
		return Result{}, err
	}
	out, err := im.render()
	if err != nil {
		return Result{}, err
	}
	sort.SliceStable(im.notes, func(i, j int) bool { return im.notes[i].kind < im.notes[j].kind })
	if !slices.ContainsFunc(im.notes, func(n Note) bool { return n.kind == noteGateway }) {
		im.notes = append([]Note{{kind: noteGateway, text: "nothing to change"}}, im.notes...)
	}
	return Result{Caddyfile: out, Notes: im.notes}, nil
}

// translate fills lines and mappings from the config.
func (im *importer) translate() error {
	hooks, err := object(im.cfg, "hooks")
	if err != nil {
		return err
	}
	if hooks == nil {
		hooks = map[string]any{}
	}
	im.hooks = hooks
	if b, _ := hooks["enabled"].(bool); !b {
		im.note(noteGateway, "hooks.enabled", "set it to true: the gateway serves no hooks until then, and every forwarded request would get 404")
	}
	if tok, _ := hooks["token"].(string); strings.TrimSpace(tok) == "" {
		im.note(noteGateway, "hooks.token", "set it to a long random value (the gateway refuses hooks without one); give the edge the same value as %s", GatewayTokenEnv)
	}
	if im.base, err = im.referenceBasePath(hooks["path"]); err != nil {
		return err
	}
	addr, err := im.gatewayAddr()
	if err != nil {
		return err
	}
	im.checkGatewaySide()

	if im.o.Mode == ModeForward {
		im.add("mode", cftoken.PlainArg(ModeForward))
		im.add("wrap", cftoken.PlainArg("gateway"))
	}
	im.add("token", cftoken.EnvArg(HookTokenEnv))
	im.add("token_headers", cftoken.PlainArg("x-openclaw-token"))
	im.add("idempotency_headers", cftoken.PlainArg("x-openclaw-idempotency-key"))
	im.add("gateway", cftoken.PlainArg(addr))
	im.add("gateway_token", cftoken.EnvArg(GatewayTokenEnv))
	im.add("gateway_prefix", cftoken.PlainArg(im.base))
	im.add("max_body", cftoken.PlainArg("256KiB"))
	if err := im.translatePolicy(); err != nil {
		return err
	}
	if err := im.translateMappings(); err != nil {
		return err
	}
	im.ignoredHookKeys()
	return nil
}

// add appends one directive to the hooks block.
func (im *importer) add(name string, args ...cftoken.Arg) {
	im.body = append(im.body, cftoken.Node{Name: name, Args: args})
}

// writable reports whether a can be written; when not, it notes key as
// not ported with the reason and what follows (then).
func (im *importer) writable(key string, a cftoken.Arg, then string) bool {
	if _, _, err := a.Encode(); err != nil {
		im.note(noteNotPorted, key, "%q cannot be written into a Caddyfile: %v; %s", a.Val, err, then)
		return false
	}
	return true
}

// referenceBasePath normalises hooks.path as the gateway does (a leading
// slash added, trailing slashes removed, "/" refused) and checks it as
// caddyhook's own path (a plain path, so a plain Caddyfile value).
func (im *importer) referenceBasePath(v any) (string, error) {
	p, _ := v.(string)
	if p = strings.TrimSpace(p); p == "" {
		return referencePath, nil
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	p, err := im.edge.BasePath(p)
	if err != nil {
		return "", fmt.Errorf("hooks.%w", err)
	}
	if !validHookPath(strings.TrimPrefix(p, "/")) {
		return "", fmt.Errorf("hooks.path: %q must be a plain path (URL path characters, no dot segments)", p)
	}
	return p, nil
}

// validHookPath reports whether p is a plain path: segments of URL path
// characters that need no escaping, no dot segments.
func validHookPath(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." || url.PathEscape(seg) != seg {
			return false
		}
	}
	return true
}

// gatewayAddr is --gateway, else loopback and gateway.port, else 18789.
func (im *importer) gatewayAddr() (string, error) {
	if im.o.Gateway != "" {
		if err := im.edge.GatewayAddr(im.o.Gateway); err != nil || !cftoken.IsBare(im.o.Gateway) {
			return "", fmt.Errorf("--gateway: %q must be a loopback host:port or unix//path.sock (plain characters only)", im.o.Gateway)
		}
		return im.o.Gateway, nil
	}
	gw, err := object(im.cfg, "gateway")
	if err != nil {
		return "", err
	}
	port := referenceGatewayPort
	if v, ok := gw["port"]; ok {
		n, ok := v.(float64)
		if !ok || n != float64(int(n)) || n < 1 || n > 65535 {
			return "", fmt.Errorf("gateway.port: %v is not a TCP port", v)
		}
		port = int(n)
	}
	return "127.0.0.1:" + strconv.Itoa(port), nil
}

// siteAddress is the site block's address: --site, checked to be one
// plain site address (no placeholder, nothing the Caddyfile would read as
// more than that address), else the HOOKS_SITE placeholder with its
// default.
func (im *importer) siteAddress() (string, error) {
	if im.o.Site == "" {
		return "{$" + SiteEnv + ":" + defaultImportSite + "}", nil
	}
	if !cftoken.IsBare(im.o.Site) || strings.Contains(im.o.Site, ",") {
		return "", fmt.Errorf("--site: %q must be one site address such as hooks.example.com or https://hooks.example.com:8443 (letters, digits and . : / - only; for a placeholder set %s instead)", im.o.Site, SiteEnv)
	}
	if _, err := httpcaddyfile.ParseAddress(im.o.Site); err != nil {
		return "", fmt.Errorf("--site: %w", err)
	}
	return im.o.Site, nil
}

// checkGatewaySide notes gateway settings an edge in front must change.
func (im *importer) checkGatewaySide() {
	gw, _ := object(im.cfg, "gateway")
	if bind, _ := gw["bind"].(string); bind != "" && bind != "loopback" {
		im.note(noteGateway, "gateway.bind", "set it to \"loopback\" (now %q): the edge is the public entry and reaches the gateway on 127.0.0.1", bind)
	}
	if tp, ok := gw["trustedProxies"]; ok && tp != nil {
		im.note(noteInfo, "gateway.trustedProxies", "the edge sends no X-Forwarded-For (gateway_forward_client_ip is off): the gateway sees every hook from the edge's loopback address, and the edge locks out guessing clients itself")
	}
	if im.o.Mode == ModeRender {
		if b, _ := im.hooks["allowRequestSessionKey"].(bool); !b {
			im.note(noteGateway, "hooks.allowRequestSessionKey", "set it to true: in render mode the edge sends the session key it resolved with every agent run")
		}
	}
}

// translatePolicy ports the agent and session policy, known agents and
// channels, and compiles it as the edge will: a policy the edge would
// refuse is refused here, naming the gateway's key.
func (im *importer) translatePolicy() error {
	pc := Policy{Forward: im.o.Mode == ModeForward}
	var err error
	if pc.Agents, err = im.agentIDs(); err != nil {
		return err
	}
	im.add("agents", cftoken.PlainArgs(pc.Agents)...)
	if v, ok := im.hooks["allowedAgentIds"]; ok {
		ids, err := stringList(v, "hooks.allowedAgentIds")
		if err != nil {
			return err
		}
		// as the edge reads them: "*" any, empty ignored, else normalised
		pc.AllowedAgentIDs, pc.AllowedAgentIDsSet = []string{}, true
		for _, id := range ids {
			if id = im.edge.AllowedAgentID(id); id != "" {
				pc.AllowedAgentIDs = append(pc.AllowedAgentIDs, id)
			}
		}
		pc.AllowedAgentIDs = slices.Compact(pc.AllowedAgentIDs)
		im.add("allowed_agent_ids", cftoken.PlainArgs(pc.AllowedAgentIDs)...)
	}
	if v, ok := im.hooks["defaultSessionKey"]; ok {
		k, ok := v.(string)
		if !ok {
			return errors.New("hooks.defaultSessionKey: must be a string")
		}
		switch k = strings.TrimSpace(k); {
		case k == "":
		case pc.Forward:
			im.note(noteInfo, "hooks.defaultSessionKey", "the gateway applies it; the edge forwards no session key of its own")
		default:
			if _, _, err := cftoken.PlainArg(k).Encode(); err != nil {
				return fmt.Errorf("hooks.defaultSessionKey: %q cannot be written into a Caddyfile: %w (--mode forward leaves it to the gateway)", k, err)
			}
			pc.DefaultSessionKey = k
			im.add("default_session_key", cftoken.PlainArg(k))
		}
	}
	if b, _ := im.hooks["allowRequestSessionKey"].(bool); b {
		pc.AllowRequestSessionKey = true
		im.add("allow_request_session_key")
	}
	if v, ok := im.hooks["allowedSessionKeyPrefixes"]; ok {
		prefixes, err := stringList(v, "hooks.allowedSessionKeyPrefixes")
		if err != nil {
			return err
		}
		refused := false
		for i, p := range prefixes {
			p = strings.ToLower(strings.TrimSpace(p))
			if p == "" || slices.Contains(pc.AllowedSessionKeyPrefixes, p) {
				continue
			}
			if !im.writable(fmt.Sprintf("hooks.allowedSessionKeyPrefixes[%d]", i), cftoken.PlainArg(p), "the edge allows no session key with it") {
				refused = true
				continue
			}
			pc.AllowedSessionKeyPrefixes = append(pc.AllowedSessionKeyPrefixes, p)
		}
		if refused && len(pc.AllowedSessionKeyPrefixes) == 0 {
			return errors.New("hooks.allowedSessionKeyPrefixes: no prefix can be written into a Caddyfile, and without one the edge would allow every session key")
		}
		if len(pc.AllowedSessionKeyPrefixes) > 0 {
			im.add("allowed_session_key_prefixes", cftoken.PlainArgs(pc.AllowedSessionKeyPrefixes)...)
		}
	}
	pc.Channels = im.channels()
	im.add("channels", cftoken.PlainArgs(pc.Channels)...)
	if im.check, err = im.edge.Policy(pc); err != nil {
		mode := "the edge would refuse it"
		if !pc.Forward {
			mode = "the edge would refuse it in render mode; --mode forward leaves the session policy to the gateway"
		}
		return fmt.Errorf("hooks: %w (%s)", err, mode)
	}
	return nil
}

// agentIDs lists the gateway's agents, its default first: the keys of
// agents.entries ("main" first when present), or the legacy agents.list[]
// (the one with default: true, else the first); "main" without either.
// Each id is normalised as the gateway (and the edge) normalise agent ids;
// one with nothing usable left is noted and left out.
func (im *importer) agentIDs() ([]string, error) {
	agents, err := object(im.cfg, "agents")
	if err != nil {
		return nil, err
	}
	var ids []string
	addID := func(key, raw string) {
		if strings.TrimSpace(raw) == "" {
			return
		}
		id, ok := im.edge.AgentID(raw)
		if !ok {
			im.note(noteNotPorted, key, "%q is not a usable agent id (nothing is left of it as the gateway normalises ids)", raw)
			return
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if entries, ok := agents["entries"].(map[string]any); ok && len(entries) > 0 {
		for _, k := range sortedKeys(entries) {
			addID(fmt.Sprintf("agents.entries[%q]", k), k)
		}
		if i := slices.Index(ids, referenceDefaultAgent); i > 0 {
			ids = append([]string{referenceDefaultAgent}, slices.Delete(ids, i, i+1)...)
		}
		if len(ids) > 0 {
			return ids, nil
		}
	}
	list, _ := agents["list"].([]any)
	def := -1
	for i, e := range list {
		a, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("agents.list[%d]: must be an object", i)
		}
		id, _ := a["id"].(string)
		n := len(ids)
		addID(fmt.Sprintf("agents.list[%d].id", i), id)
		if d, _ := a["default"].(bool); d && def < 0 && len(ids) > n {
			def = n
		}
	}
	if len(ids) == 0 {
		return []string{referenceDefaultAgent}, nil
	}
	if def > 0 {
		ids = append([]string{ids[def]}, append(ids[:def:def], ids[def+1:]...)...)
	}
	return ids, nil
}

// channels is "last" plus the channels configured on the gateway (the
// delivery channels it has plugins for); a name that cannot be written
// is noted and left out.
func (im *importer) channels() []string {
	chans, _ := im.cfg["channels"].(map[string]any)
	var names []string
	for _, key := range sortedKeys(chans) {
		if c, ok := chans[key].(map[string]any); ok {
			if on, ok := c["enabled"].(bool); ok && !on {
				continue
			}
		}
		name := strings.ToLower(strings.TrimSpace(key))
		if name == "" || name == channelLast || name == "defaults" || slices.Contains(names, name) {
			continue
		}
		if im.writable(fmt.Sprintf("channels[%q]", key), cftoken.PlainArg(name), "the edge refuses it as a delivery channel") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return append([]string{channelLast}, names...)
}

// ignoredHookKeys notes the hooks keys the edge does not carry.
func (im *importer) ignoredHookKeys() {
	handled := map[string]bool{"enabled": true, "token": true, "path": true, "allowedAgentIds": true,
		"defaultSessionKey": true, "allowRequestSessionKey": true, "allowedSessionKeyPrefixes": true,
		"presets": true, "mappings": true, "transformsDir": true, "gmail": true}
	for _, k := range sortedKeys(im.hooks) {
		switch {
		case handled[k]:
		case k == "internal":
			im.note(noteNotPorted, "hooks.internal", "internal event hooks run inside the gateway; they are not HTTP ingress")
		default:
			im.note(noteNotPorted, "hooks."+k, "unknown key (the gateway's schema has no such key)")
		}
	}
	gmail, _ := im.hooks["gmail"].(map[string]any)
	for _, k := range sortedKeys(gmail) {
		switch k {
		case "maxBytes":
		case "model", "thinking", "allowUnsafeExternalContent":
			if im.o.Mode == ModeRender {
				im.note(noteNotPorted, "hooks.gmail."+k, "the gateway applies it to runs of its own /hooks/gmail only; in render mode the edge sends Gmail runs to /hooks/agent (use --mode forward, or set it on a gmail mapping)")
			}
		default:
			im.note(noteNotPorted, "hooks.gmail."+k, "Gmail watcher transport: the watcher posts to the gateway on loopback (hooks.gmail.hookUrl), not through the edge")
		}
	}
	if _, ok := im.hooks["transformsDir"]; ok && im.o.Mode == ModeForward {
		im.note(noteInfo, "hooks.transformsDir", "transforms keep running in the gateway (forward mode); nothing to port")
	}
}

// object returns cfg[key] as an object (nil when absent).
func object(cfg map[string]any, key string) (map[string]any, error) {
	v, ok := cfg[key]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: must be an object", key)
	}
	return m, nil
}

// stringList reads a JSON array of strings.
func stringList(v any, key string) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: must be an array of strings", key)
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: must be a string", key, i)
		}
		out = append(out, s)
	}
	return out, nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// render writes the Caddyfile through the writer.
func (im *importer) render() (string, error) {
	site, err := im.siteAddress()
	if err != nil {
		return "", err
	}
	header := []string{
		fmt.Sprintf("Generated by `caddy hooks import` (--mode %s) from", im.o.Mode),
		"  " + im.file,
		"",
		"Environment, read when Caddy loads this file:",
	}
	if im.o.Site == "" {
		header = append(header, fmt.Sprintf("  %-20s the public site address (default %s: every host name on port 8080),", SiteEnv, defaultImportSite),
			fmt.Sprintf("  %-20s or a host name for HTTPS, e.g. hooks.example.com (that name only)", ""))
	}
	header = append(header,
		fmt.Sprintf("  %-20s the public hook token senders use (≥ 32 random characters: openssl rand -hex 32)", HookTokenEnv),
		fmt.Sprintf("  %-20s the gateway's hooks.token (must differ from %s)", GatewayTokenEnv, HookTokenEnv))
	hooks := cftoken.Node{Name: "hooks", Args: []cftoken.Arg{cftoken.PlainArg(im.base)}, Block: true, Body: im.body}
	for _, m := range im.mappings {
		hooks.Body = append(hooks.Body, cftoken.Node{}, m)
	}
	return cftoken.Write(cftoken.File{Header: header, Site: site, Body: []cftoken.Node{
		hooks,
		{Name: "respond", Args: []cftoken.Arg{cftoken.PlainArg("Not Found"), cftoken.PlainArg("404")}},
	}})
}
