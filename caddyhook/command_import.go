package caddyhook

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/titanous/json5"
)

// newImportCommand builds `caddy hooks import`: a Caddyfile that fronts an
// existing reference gateway with the same hooks, from the gateway's own
// JSON5 config.
func newImportCommand() *cobra.Command {
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
http://localhost:8080).

Stderr lists what must change on the gateway side, if anything, and every key
that could not be ported, with the reason.
`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var o importOptions
			f := cmd.Flags()
			o.site, _ = f.GetString("site")
			o.gateway, _ = f.GetString("gateway")
			o.mode, _ = f.GetString("mode")
			cmd.SilenceUsage = true
			return runImport(cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], o)
		},
	}
	f := cmd.Flags()
	f.String("site", "", "Site address of the generated site block (default: {$HOOKS_SITE:http://localhost:8080})")
	f.String("gateway", "", "Gateway address host:port (default: 127.0.0.1 and the config's gateway.port, else 18789)")
	f.String("mode", modeForwardName, "forward (the gateway maps) or render (the edge maps)")
	return cmd
}

// Import defaults: the reference gateway's port and fixed body limit, the
// environment variables the generated file reads.
const (
	referenceGatewayPort = 18789
	referenceMaxBody     = 256 << 10
	siteEnv              = "HOOKS_SITE"
	defaultImportSite    = "http://localhost:8080"
	hookTokenEnv         = "HOOK_TOKEN"
	gatewayTokenEnv      = "OPENCLAW_HOOKS_TOKEN"
	modeForwardName      = "forward"
	modeRenderName       = "render"
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

// importOptions are the flags of `caddy hooks import`.
type importOptions struct {
	site, gateway, mode string
}

// runImport reads file and writes the Caddyfile to out and the notes to notes.
func runImport(out, notes io.Writer, file string, o importOptions) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	res, err := importGatewayConfig(src, abs, o)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if _, err := io.WriteString(out, res.caddyfile); err != nil {
		return err
	}
	for _, n := range res.notes {
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

// importNote is one line on stderr.
type importNote struct {
	kind noteKind
	key  string // the gateway config key, dotted
	text string
}

// String formats the note as printed.
func (n importNote) String() string {
	prefix := map[noteKind]string{noteGateway: "gateway side", noteNotPorted: "not ported", noteInfo: "note"}[n.kind]
	if n.key == "" {
		return prefix + ": " + n.text
	}
	return prefix + ": " + n.key + ": " + n.text
}

// importResult is the generated Caddyfile and its notes.
type importResult struct {
	caddyfile string
	notes     []importNote
}

// importer holds one translation.
type importer struct {
	o        importOptions
	file     string // absolute path of the gateway config
	cfg      map[string]any
	hooks    map[string]any
	notes    []importNote
	lines    []string // hooks block body, one directive per entry (may hold nested lines)
	mappings [][]string
}

// note records a stderr note.
func (im *importer) note(kind noteKind, key, format string, args ...any) {
	im.notes = append(im.notes, importNote{kind: kind, key: key, text: fmt.Sprintf(format, args...)})
}

// importGatewayConfig translates a gateway config (JSON5) into a Caddyfile.
// file is the config's absolute path (for the header and transforms).
func importGatewayConfig(src []byte, file string, o importOptions) (importResult, error) {
	switch o.mode {
	case "":
		o.mode = modeForwardName
	case modeForwardName, modeRenderName:
	default:
		return importResult{}, fmt.Errorf("--mode: %q must be forward or render", o.mode)
	}
	var raw any
	if err := json5.Unmarshal(src, &raw); err != nil {
		return importResult{}, fmt.Errorf("not valid JSON5: %w", err)
	}
	cfg, ok := raw.(map[string]any)
	if !ok {
		return importResult{}, errors.New("the config must be a JSON5 object")
	}
	im := &importer{o: o, file: file, cfg: cfg}
	if err := im.translate(); err != nil {
		return importResult{}, err
	}
	sort.SliceStable(im.notes, func(i, j int) bool { return im.notes[i].kind < im.notes[j].kind })
	if !slices.ContainsFunc(im.notes, func(n importNote) bool { return n.kind == noteGateway }) {
		im.notes = append([]importNote{{kind: noteGateway, text: "nothing to change"}}, im.notes...)
	}
	return importResult{caddyfile: im.render(), notes: im.notes}, nil
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
		im.note(noteGateway, "hooks.token", "set it to a long random value (the gateway refuses hooks without one); give the edge the same value as %s", gatewayTokenEnv)
	}
	base, err := referenceBasePath(hooks["path"])
	if err != nil {
		return err
	}
	addr, err := im.gatewayAddr()
	if err != nil {
		return err
	}
	im.checkGatewaySide()

	if im.o.mode == modeForwardName {
		im.add("mode forward")
		im.add("wrap gateway")
	}
	im.add("token {env." + hookTokenEnv + "}")
	im.add("token_headers x-openclaw-token")
	im.add("idempotency_headers x-openclaw-idempotency-key")
	im.add("gateway " + addr)
	im.add("gateway_token {env." + gatewayTokenEnv + "}")
	im.add("gateway_prefix " + base)
	im.add("max_body 256KiB")
	if err := im.policy(); err != nil {
		return err
	}
	if err := im.translateMappings(); err != nil {
		return err
	}
	im.lines = append([]string{"path " + base}, im.lines...)
	im.ignoredHookKeys()
	return nil
}

// add appends one directive to the hooks block.
func (im *importer) add(line string) { im.lines = append(im.lines, line) }

// referenceBasePath normalises hooks.path as the gateway does (a leading
// slash added, trailing slashes removed, "/" refused) and checks it as
// caddyhook's own path.
func referenceBasePath(v any) (string, error) {
	p, _ := v.(string)
	if p = strings.TrimSpace(p); p == "" {
		return defaultPath, nil
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if err := validateBasePath(p); err != nil {
		return "", fmt.Errorf("hooks.%w", err)
	}
	p = cleanBasePath(p)
	if strings.ContainsAny(p, " \t\"'`") {
		return "", fmt.Errorf("hooks.path: %q must be a plain path", p)
	}
	return p, nil
}

// gatewayAddr is --gateway, else loopback and gateway.port, else 18789.
func (im *importer) gatewayAddr() (string, error) {
	if im.o.gateway != "" {
		host, port, ok := strings.Cut(im.o.gateway, ":")
		if !ok || host == "" || port == "" || strings.ContainsAny(im.o.gateway, " \t{}") {
			return "", fmt.Errorf("--gateway: %q must be host:port", im.o.gateway)
		}
		return im.o.gateway, nil
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

// checkGatewaySide notes gateway settings an edge in front must change.
func (im *importer) checkGatewaySide() {
	gw, _ := object(im.cfg, "gateway")
	if bind, _ := gw["bind"].(string); bind != "" && bind != "loopback" {
		im.note(noteGateway, "gateway.bind", "set it to \"loopback\" (now %q): the edge is the public entry and reaches the gateway on 127.0.0.1", bind)
	}
	if tp, ok := gw["trustedProxies"]; ok && tp != nil {
		im.note(noteInfo, "gateway.trustedProxies", "the edge sends no X-Forwarded-For (gateway_forward_client_ip is off): the gateway sees every hook from the edge's loopback address, and the edge locks out guessing clients itself")
	}
	if im.o.mode == modeRenderName {
		if b, _ := im.hooks["allowRequestSessionKey"].(bool); !b {
			im.note(noteGateway, "hooks.allowRequestSessionKey", "set it to true: in render mode the edge sends the session key it resolved with every agent run")
		}
	}
}

// policy ports the agent and session policy, known agents and channels.
func (im *importer) policy() error {
	agents, err := im.agentIDs()
	if err != nil {
		return err
	}
	im.add("agents " + joinTokens(agents))
	if v, ok := im.hooks["allowedAgentIds"]; ok {
		ids, err := stringList(v, "hooks.allowedAgentIds")
		if err != nil {
			return err
		}
		line := "allowed_agent_ids"
		if len(ids) > 0 {
			line += " " + joinTokens(ids)
		}
		im.add(line)
	}
	if v, ok := im.hooks["defaultSessionKey"]; ok {
		k, ok := v.(string)
		if !ok {
			return errors.New("hooks.defaultSessionKey: must be a string")
		}
		switch k = strings.TrimSpace(k); {
		case k == "":
		case im.o.mode == modeForwardName:
			im.note(noteInfo, "hooks.defaultSessionKey", "the gateway applies it; the edge forwards no session key of its own")
		default:
			im.add("default_session_key " + caddyfileToken(k))
		}
	}
	if b, _ := im.hooks["allowRequestSessionKey"].(bool); b {
		im.add("allow_request_session_key")
	}
	if v, ok := im.hooks["allowedSessionKeyPrefixes"]; ok {
		prefixes, err := stringList(v, "hooks.allowedSessionKeyPrefixes")
		if err != nil {
			return err
		}
		var kept []string
		for _, p := range prefixes {
			if p = strings.ToLower(strings.TrimSpace(p)); p != "" && !slices.Contains(kept, p) {
				kept = append(kept, p)
			}
		}
		if len(kept) > 0 {
			im.add("allowed_session_key_prefixes " + joinTokens(kept))
		}
	}
	im.add("channels " + joinTokens(im.channels()))
	return nil
}

// agentIDs lists the gateway's agents, its default first: the keys of
// agents.entries ("main" first when present), or the legacy agents.list[]
// (the one with default: true, else the first); "main" without either.
func (im *importer) agentIDs() ([]string, error) {
	agents, err := object(im.cfg, "agents")
	if err != nil {
		return nil, err
	}
	if entries, ok := agents["entries"].(map[string]any); ok && len(entries) > 0 {
		var ids []string
		for _, k := range sortedKeys(entries) {
			if id := strings.ToLower(strings.TrimSpace(k)); id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		if i := slices.Index(ids, "main"); i > 0 {
			ids = append([]string{"main"}, slices.Delete(ids, i, i+1)...)
		}
		if len(ids) > 0 {
			return ids, nil
		}
	}
	list, _ := agents["list"].([]any)
	var ids []string
	def := -1
	for i, e := range list {
		a, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("agents.list[%d]: must be an object", i)
		}
		id, _ := a["id"].(string)
		if id = strings.ToLower(strings.TrimSpace(id)); id == "" || slices.Contains(ids, id) {
			continue
		}
		if d, _ := a["default"].(bool); d && def < 0 {
			def = len(ids)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return []string{"main"}, nil
	}
	if def > 0 {
		ids = append([]string{ids[def]}, append(ids[:def:def], ids[def+1:]...)...)
	}
	return ids, nil
}

// channels is "last" plus the channels configured on the gateway (the
// delivery channels it has plugins for).
func (im *importer) channels() []string {
	out := []string{"last"}
	chans, _ := im.cfg["channels"].(map[string]any)
	names := make([]string, 0, len(chans))
	for name, v := range chans {
		if c, ok := v.(map[string]any); ok {
			if on, ok := c["enabled"].(bool); ok && !on {
				continue
			}
		}
		if name = strings.ToLower(strings.TrimSpace(name)); name != "" && name != "last" && name != "defaults" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return append(out, names...)
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
			if im.o.mode == modeRenderName {
				im.note(noteNotPorted, "hooks.gmail."+k, "the gateway applies it to runs of its own /hooks/gmail only; in render mode the edge sends Gmail runs to /hooks/agent (use --mode forward, or set it on a gmail mapping)")
			}
		default:
			im.note(noteNotPorted, "hooks.gmail."+k, "Gmail watcher transport: the watcher posts to the gateway on loopback (hooks.gmail.hookUrl), not through the edge")
		}
	}
	if _, ok := im.hooks["transformsDir"]; ok && im.o.mode == modeForwardName {
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

// joinTokens formats values as Caddyfile arguments.
func joinTokens(vals []string) string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = caddyfileToken(v)
	}
	return strings.Join(out, " ")
}

// caddyfileToken returns s as one Caddyfile token that the lexer gives
// back unchanged: bare when it is plain, else quoted.
func caddyfileToken(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\r\n\"'`{}#\\;") && !strings.HasPrefix(s, "<<") {
		return s
	}
	if !strings.Contains(s, "`") {
		return "`" + s + "`"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// render writes the Caddyfile.
func (im *importer) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Generated by `caddy hooks import` (--mode %s) from\n#   %s\n", im.o.mode, im.file)
	b.WriteString("#\n# Environment, read when Caddy loads this file:\n")
	if im.o.site == "" {
		fmt.Fprintf(&b, "#   %-20s the public site address (default %s), e.g. hooks.example.com\n", siteEnv, defaultImportSite)
	}
	fmt.Fprintf(&b, "#   %-20s the public hook token senders use (≥ 32 random characters: openssl rand -hex 32)\n", hookTokenEnv)
	fmt.Fprintf(&b, "#   %-20s the gateway's hooks.token (must differ from %s)\n", gatewayTokenEnv, hookTokenEnv)
	site := im.o.site
	if site == "" {
		site = "{$" + siteEnv + ":" + defaultImportSite + "}"
	}
	fmt.Fprintf(&b, "\n%s {\n", site)
	base := strings.TrimPrefix(im.lines[0], "path ")
	fmt.Fprintf(&b, "\thooks %s {\n", base)
	for _, l := range im.lines[1:] {
		b.WriteString("\t\t" + l + "\n")
	}
	for _, m := range im.mappings {
		b.WriteString("\n")
		for _, l := range m {
			b.WriteString("\t\t" + l + "\n")
		}
	}
	b.WriteString("\t}\n\trespond \"Not Found\" 404\n}\n")
	return b.String()
}
