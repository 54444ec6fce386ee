package importcmd

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyhook/caddyhook/internal/cftoken"
	"github.com/caddyhook/caddyhook/internal/transform"
)

// referenceMappingSpec is one mapping of the gateway's config (hooks.mappings
// or a preset), as the gateway normalises it.
type referenceMappingSpec struct {
	key         string // config key for notes, e.g. hooks.mappings[2]
	id          string
	defaultID   string // the gateway's id for a mapping without one
	path        string // trimmed of slashes; "" = any
	source      string
	preset      string // preset name, for presets
	fields      map[string]any
	transformMD string
	transformEx string
}

// referencePresetMappings are the gateway's presets (name → mapping ids).
var referencePresetMappings = map[string]string{referenceGmailPreset: "gmail"}

// translateMappings ports hooks.mappings and hooks.presets, in the
// gateway's order: configured mappings first, then presets. Every mapping
// is compiled here as the edge will compile it when it loads the file;
// one the edge would refuse is noted and left out, so that the generated
// file always loads.
func (im *importer) translateMappings() error {
	specs, err := im.referenceMappings()
	if err != nil {
		return err
	}
	gmailLimit, err := im.gmailBodyLimit()
	if err != nil {
		return err
	}
	c := im.newMappingCheck()
	if im.o.Mode == ModeRender {
		im.renderPresets(specs, c)
	}
	for _, s := range specs {
		if s.path == routeWake || s.path == routeAgent {
			im.note(noteNotPorted, s.key, "match.path %q is shadowed by the gateway's built-in /%s, so the mapping never runs", s.path, s.path)
			continue
		}
		if s.preset != "" && im.o.Mode == ModeRender {
			continue // caddyhook's own preset (renderPresets)
		}
		m, ok := im.importedMapping(s, gmailLimit)
		if !ok {
			continue
		}
		m.id = c.uniqueID(m.id)
		if err := c.check(m); err != nil {
			im.note(noteNotPorted, s.key, "the edge would refuse it (%v); the mapping is left out (use --mode forward)", err)
			continue
		}
		c.used[m.id] = true
		var comment string
		if s.preset != "" {
			comment = "the gateway's preset " + s.preset
		}
		im.mappings = append(im.mappings, m.node(comment))
	}
	if c.transforms {
		im.transformsLines(c)
	}
	return nil
}

// mapping is one mapping block of the generated file: its id, its
// directives in the order they are written, and its transform (which the
// translation checks itself).
type mapping struct {
	id        string
	body      []cftoken.Node
	transform *transformRef
}

// transformRef is a mapping's transform module and export.
type transformRef struct{ module, export string }

// add appends a directive.
func (m *mapping) add(name string, args ...cftoken.Arg) {
	m.body = append(m.body, cftoken.Node{Name: name, Args: args})
}

// node is m as a mapping block, comment (if any) first.
func (m *mapping) node(comment string) cftoken.Node {
	n := cftoken.Node{Name: "mapping", Args: []cftoken.Arg{cftoken.PlainArg(m.id)}, Block: true}
	if comment != "" {
		n.Body = append(n.Body, cftoken.Node{Comment: comment})
	}
	n.Body = append(n.Body, m.body...)
	return n
}

// importedMapping is the edge's mapping for s: a forward mapping, or in
// render mode the gateway's fields ported; ok is false (and a note says
// why) when it cannot be carried.
func (im *importer) importedMapping(s referenceMappingSpec, gmailLimit int64) (*mapping, bool) {
	m := &mapping{id: s.id}
	if !im.writable(s.key+".id", cftoken.PlainArg(s.id), fmt.Sprintf("the edge names the mapping %s", s.defaultID)) {
		m.id = s.defaultID
	}
	path, ok := im.edgeMatchPath(s)
	if !ok {
		return m, false
	}
	if path != "" {
		m.add("match_path", cftoken.FieldArg(path))
	}
	if s.source != "" {
		if !im.writable(s.key+".match.source", cftoken.FieldArg(s.source), "the mapping is left out") {
			return m, false
		}
		m.add("match_source", cftoken.FieldArg(s.source))
	}
	if im.o.Mode == ModeForward {
		m.add("forward")
		if a, _ := s.fields["action"].(string); strings.TrimSpace(a) == "wake" {
			// the spool lane: wake requests keep acceptance order
			m.add("action", cftoken.FieldArg("wake"))
		}
	} else if !im.renderedMapping(s, m) {
		return m, false
	}
	if s.path == referenceGmailPathKey && gmailLimit > referenceMaxBody {
		m.add("max_body", cftoken.PlainArg(strconv.FormatInt(gmailLimit, 10)))
	}
	return m, true
}

// edgeMatchPath is the edge's match_path for the gateway's match.path.
// The gateway compares match.path with the request path as the URL parser
// leaves it (percent-encoded: café arrives as caf%C3%A9); the edge
// compares the decoded path and escapes it again when it forwards. So a
// match.path is carried, decoded, when it is exactly the escaping of its
// decoding (caf%C3%A9 becomes café). In forward mode the edge compares a
// mapping's match_path as the gateway does, so any other match.path that
// the gateway's URL parser leaves as it is (a%2Fb, lower-case escapes) is
// carried as written; the rest (café itself, which never matches on the
// gateway) is noted and the mapping left out, as every one is in render
// mode, where the edge compares decoded names.
func (im *importer) edgeMatchPath(s referenceMappingSpec) (string, bool) {
	if s.path == "" {
		return "", true
	}
	key := s.key + ".match.path"
	decoded, err := url.PathUnescape(s.path)
	if im.o.Mode == ModeForward && (err != nil || (&url.URL{Path: "/" + decoded}).EscapedPath() != "/"+s.path) && im.edge.ForwardName(s.path) == s.path {
		return s.path, im.writable(key, cftoken.FieldArg(s.path), "the mapping is left out")
	}
	if err == nil {
		if escaped := (&url.URL{Path: "/" + decoded}).EscapedPath(); escaped != "/"+s.path {
			err = fmt.Errorf("the gateway compares it with the percent-encoded request path, and the edge forwards this hook name as %q, which it does not match", strings.TrimPrefix(escaped, "/"))
		}
	}
	if err != nil {
		im.note(noteNotPorted, key, "%q: %v; the mapping is left out", s.path, err)
		return "", false
	}
	return decoded, im.writable(key, cftoken.FieldArg(decoded), "the mapping is left out")
}

// mappingCheck checks imported mappings as the edge will: through the
// edge's Checker, and their transforms here.
type mappingCheck struct {
	edge       Checker
	used       map[string]bool // ids taken
	root, dir  string          // transforms_root and transforms_dir to write
	resolved   string          // the transforms directory they resolve to, "" if they do not
	rootErr    error
	transforms bool             // a ported mapping has a transform
	cache      *transform.Cache // compiles the transforms, once each
}

// newMappingCheck sets up the check under the imported policy.
func (im *importer) newMappingCheck() *mappingCheck {
	c := &mappingCheck{edge: im.check, used: map[string]bool{}}
	c.root = filepath.Join(filepath.Dir(im.file), "hooks", "transforms")
	if d, _ := im.hooks["transformsDir"].(string); strings.TrimSpace(d) != "" {
		c.dir = strings.TrimSpace(d)
	}
	for _, a := range []struct{ key, val string }{{"transforms root (next to the config)", c.root}, {"hooks.transformsDir", c.dir}} {
		if _, _, err := cftoken.PlainArg(a.val).Encode(); err != nil {
			c.rootErr = fmt.Errorf("%s %q cannot be written into a Caddyfile: %w", a.key, a.val, err)
			return c
		}
	}
	if c.resolved, c.rootErr = transform.ResolveDir(c.root, c.dir); c.rootErr != nil {
		c.resolved = ""
	}
	return c
}

// uniqueID is id, or id-2, id-3, … when an earlier mapping has it.
func (c *mappingCheck) uniqueID(id string) string {
	out := id
	for i := 2; c.used[out]; i++ {
		out = fmt.Sprintf("%s-%d", id, i)
	}
	return out
}

// check compiles m as the edge's provisioning does: its block as the
// edge reads it (fields, templates and CEL, the session-key rules of the
// policy), and its transform.
func (c *mappingCheck) check(m *mapping) error {
	if err := c.edge.Mapping(m.node(""), len(c.used)+1); err != nil {
		return err
	}
	if t := m.transform; t != nil {
		if c.resolved == "" {
			return fmt.Errorf("transform: %w", c.rootErr)
		}
		file, err := transform.ResolveModule(c.resolved, t.module)
		if err != nil {
			return fmt.Errorf("transform: %w", err)
		}
		if c.cache == nil {
			c.cache = transform.NewCache()
		}
		if _, err := c.cache.Program(file, t.export, transform.Options{Root: c.resolved}); err != nil {
			return fmt.Errorf("transform: %w", err)
		}
		c.transforms = true
	}
	return nil
}

// referenceMappings reads hooks.mappings and hooks.presets.
func (im *importer) referenceMappings() ([]referenceMappingSpec, error) {
	var specs []referenceMappingSpec
	if v, ok := im.hooks["mappings"]; ok && v != nil {
		arr, ok := v.([]any)
		if !ok {
			return nil, errors.New("hooks.mappings: must be an array")
		}
		for i, e := range arr {
			key := fmt.Sprintf("hooks.mappings[%d]", i)
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: must be an object", key)
			}
			s, err := parseReferenceMapping(key, m, len(specs))
			if err != nil {
				return nil, err
			}
			specs = append(specs, s)
		}
	}
	if v, ok := im.hooks["presets"]; ok && v != nil {
		names, err := stringList(v, "hooks.presets")
		if err != nil {
			return nil, err
		}
		for i, name := range names {
			key := fmt.Sprintf("hooks.presets[%d]", i)
			id, ok := referencePresetMappings[name]
			if !ok {
				im.note(noteNotPorted, key, "unknown preset %q (the gateway adds no mapping for it)", name)
				continue
			}
			specs = append(specs, referenceMappingSpec{key: key, id: id, defaultID: id, path: referenceGmailPathKey, preset: name})
		}
	}
	return specs, nil
}

// parseReferenceMapping normalises one configured mapping like the gateway:
// id default mapping-<n>, match.path without surrounding slashes.
func parseReferenceMapping(key string, m map[string]any, index int) (referenceMappingSpec, error) {
	s := referenceMappingSpec{key: key, fields: m}
	s.id, _ = m["id"].(string)
	s.defaultID = fmt.Sprintf("mapping-%d", index+1)
	if s.id = strings.TrimSpace(s.id); s.id == "" {
		s.id = s.defaultID
	}
	if v, ok := m["match"]; ok && v != nil {
		match, ok := v.(map[string]any)
		if !ok {
			return s, fmt.Errorf("%s.match: must be an object", key)
		}
		p, _ := match["path"].(string)
		s.path = strings.Trim(strings.TrimSpace(p), "/")
		src, _ := match["source"].(string)
		s.source = strings.TrimSpace(src)
	}
	if v, ok := m["transform"]; ok && v != nil {
		t, ok := v.(map[string]any)
		if !ok {
			return s, fmt.Errorf("%s.transform: must be an object", key)
		}
		s.transformMD, _ = t["module"].(string)
		s.transformEx, _ = t["export"].(string)
		if strings.TrimSpace(s.transformMD) == "" {
			return s, fmt.Errorf("%s.transform.module: required", key)
		}
	}
	return s, nil
}

// gmailBodyLimit is the gateway's body allowance for gmail-path mappings.
func (im *importer) gmailBodyLimit() (int64, error) {
	maxBytes := int64(gmailDefaultMaxBytes)
	gmail, err := object(im.hooks, "gmail")
	if err != nil {
		return 0, fmt.Errorf("hooks.%w", err)
	}
	if n, ok := gmail["maxBytes"].(float64); ok && n > 0 && n < 1<<40 {
		maxBytes = int64(n)
	}
	limit := min(int64(gmailMaxBodyCeiling), gmailBatchMessages*(maxBytes*gmailEscapingFactor+gmailPerMessageBytes))
	return max(limit, referenceMaxBody), nil
}

// renderedMapping ports a mapping's fields into m for render mode; false
// (and a note says why) when the mapping cannot be carried.
func (im *importer) renderedMapping(s referenceMappingSpec, m *mapping) bool {
	fail := func(field string, err error) bool {
		im.note(noteNotPorted, s.key+"."+field, "%v; the mapping is left out (use --mode forward)", err)
		return false
	}
	str := func(field string) string { v, _ := s.fields[field].(string); return strings.TrimSpace(v) }
	if a := str("action"); a == "wake" {
		m.add("action", cftoken.FieldArg("wake"))
	}
	if wm := str("wakeMode"); wm != "" {
		m.add("wake_mode", cftoken.FieldArg(wm))
	}
	for _, t := range []struct{ field, directive string }{
		{"name", "name"}, {"agentId", "agent_id"}, {"sessionKey", "session_key"},
		{"messageTemplate", "message_template"}, {"textTemplate", "text_template"},
		{"channel", "channel"}, {"to", "to"}, {"model", "model"}, {"thinking", "thinking"},
	} {
		raw, _ := s.fields[t.field].(string)
		if raw == "" {
			continue
		}
		if _, _, err := cftoken.TemplateArg(raw).Encode(); err != nil {
			return fail(t.field, err)
		}
		m.add(t.directive, cftoken.TemplateArg(raw))
	}
	if fe := str("forEach"); fe != "" {
		if _, _, err := cftoken.FieldArg(fe).Encode(); err != nil {
			return fail("forEach", err)
		}
		m.add("for_each", cftoken.FieldArg(fe))
	}
	if d, ok := s.fields["deliver"].(bool); ok {
		m.add("deliver", cftoken.PlainArg(strconv.FormatBool(d)))
	}
	if unsafe, _ := s.fields["allowUnsafeExternalContent"].(bool); unsafe {
		m.add("allow_unsafe_external_content")
	}
	if n, ok := s.fields["timeoutSeconds"].(float64); ok && n > 0 && n == float64(int64(n)) && n <= math.MaxInt32 {
		m.add("timeout_seconds", cftoken.PlainArg(strconv.Itoa(int(n))))
	}
	if sm := str("sessionMode"); sm != "" && sm != "isolated" {
		im.note(noteNotPorted, s.key+".sessionMode", "render mode dispatches isolated runs only (use --mode forward for %q)", sm)
	}
	if md := strings.TrimSpace(s.transformMD); md != "" {
		t := &transformRef{module: md, export: strings.TrimSpace(s.transformEx)}
		for _, v := range []string{t.module, t.export} {
			if _, _, err := cftoken.PlainArg(v).Encode(); err != nil {
				return fail("transform", err)
			}
		}
		args := []cftoken.Arg{cftoken.PlainArg(t.module)}
		if t.export != "" {
			args = append(args, cftoken.PlainArg(t.export))
		}
		m.add("transform", args...)
		m.transform = t
	}
	return true
}

// renderPresets ports the presets in render mode: caddyhook's own preset
// of the same name, checked like a mapping (its id reserved first, so a
// configured mapping of the same id is renamed).
func (im *importer) renderPresets(specs []referenceMappingSpec, c *mappingCheck) {
	var names []string
	for _, s := range specs {
		if s.preset != "" && !slices.Contains(names, s.preset) {
			names = append(names, s.preset)
		}
	}
	var kept []string
	for _, name := range names {
		id, err := c.edge.Preset(name, len(c.used)+1)
		if err != nil {
			im.note(noteNotPorted, "hooks.presets", "%s: the edge would refuse caddyhook's preset (%v); it is left out (use --mode forward)", name, err)
			continue
		}
		c.used[id] = true
		kept = append(kept, name)
	}
	if len(kept) == 0 {
		return
	}
	im.add("presets", cftoken.PlainArgs(kept)...)
	if gmail, _ := im.hooks["gmail"].(map[string]any); gmail != nil {
		if _, ok := gmail["maxBytes"]; ok {
			im.note(noteNotPorted, "hooks.gmail.maxBytes", "caddyhook's gmail preset keeps the default allowance (6,819,200 bytes) in render mode")
		}
	}
}

// transformsLines confines render-mode transforms to the gateway's own
// transforms directory.
func (im *importer) transformsLines(c *mappingCheck) {
	im.add("transforms_root", cftoken.PlainArg(c.root))
	if c.dir != "" {
		im.add("transforms_dir", cftoken.PlainArg(c.dir))
	}
	im.note(noteInfo, "hooks.mappings[].transform", "render mode runs transforms in caddyhook's sandbox (no require, process, fs, network or timers); modules that use Node APIs must stay in the gateway (--mode forward)")
}
