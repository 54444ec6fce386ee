package caddyhook

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// referenceMappingSpec is one mapping of the gateway's config (hooks.mappings
// or a preset), as the gateway normalises it.
type referenceMappingSpec struct {
	key         string // config key for notes, e.g. hooks.mappings[2]
	id          string
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
// gateway's order: configured mappings first, then presets.
func (im *importer) translateMappings() error {
	specs, err := im.referenceMappings()
	if err != nil {
		return err
	}
	gmailLimit, err := im.gmailBodyLimit()
	if err != nil {
		return err
	}
	used := map[string]int{}
	needTransforms := false
	for _, s := range specs {
		if s.path == routeWake || s.path == routeAgent {
			im.note(noteNotPorted, s.key, "match.path %q is shadowed by the gateway's built-in /%s, so the mapping never runs", s.path, s.path)
			continue
		}
		if s.preset != "" && im.o.mode == modeRenderName {
			im.presetLine(s)
			continue
		}
		id := s.id
		if used[id]++; used[id] > 1 {
			id = fmt.Sprintf("%s-%d", id, used[id])
		}
		lines := []string{"mapping " + caddyfileToken(id) + " {"}
		if s.preset != "" {
			lines = append(lines, "\t# the gateway's preset "+s.preset)
		}
		if s.path != "" {
			lines = append(lines, "\tmatch_path "+caddyfileToken(s.path))
		}
		if s.source != "" {
			lines = append(lines, "\tmatch_source "+caddyfileToken(s.source))
		}
		if im.o.mode == modeForwardName {
			lines = append(lines, "\tforward")
		} else {
			body, ok := im.renderedMapping(s)
			if !ok {
				continue
			}
			lines = append(lines, body...)
			needTransforms = needTransforms || s.transformMD != ""
		}
		if s.path == referenceGmailPathKey && gmailLimit > referenceMaxBody {
			lines = append(lines, "\tmax_body "+strconv.FormatInt(gmailLimit, 10))
		}
		im.mappings = append(im.mappings, append(lines, "}"))
	}
	if needTransforms {
		im.transformsLines()
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
			specs = append(specs, referenceMappingSpec{key: key, id: id, path: referenceGmailPathKey, preset: name})
		}
	}
	return specs, nil
}

// parseReferenceMapping normalises one configured mapping like the gateway:
// id default mapping-<n>, match.path without surrounding slashes.
func parseReferenceMapping(key string, m map[string]any, index int) (referenceMappingSpec, error) {
	s := referenceMappingSpec{key: key, fields: m}
	s.id, _ = m["id"].(string)
	if s.id = strings.TrimSpace(s.id); s.id == "" {
		s.id = fmt.Sprintf("mapping-%d", index+1)
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

// renderedMapping ports a mapping's fields for render mode; ok is false
// (and a note says why) when the mapping cannot be carried.
func (im *importer) renderedMapping(s referenceMappingSpec) ([]string, bool) {
	var lines []string
	fail := func(field, why string) ([]string, bool) {
		im.note(noteNotPorted, s.key+"."+field, "%s; the mapping is left out (use --mode forward)", why)
		return nil, false
	}
	str := func(field string) string { v, _ := s.fields[field].(string); return strings.TrimSpace(v) }
	if a := str("action"); a == "wake" {
		lines = append(lines, "\taction wake")
	}
	if w := str("wakeMode"); w != "" {
		lines = append(lines, "\twake_mode "+caddyfileToken(w))
	}
	templates := []struct{ field, directive string }{
		{"name", "name"}, {"agentId", "agent_id"}, {"sessionKey", "session_key"},
		{"messageTemplate", "message_template"}, {"textTemplate", "text_template"},
		{"channel", "channel"}, {"to", "to"}, {"model", "model"}, {"thinking", "thinking"},
	}
	for _, t := range templates {
		raw, _ := s.fields[t.field].(string)
		if raw == "" {
			continue
		}
		tok, err := templateToken(raw)
		if err != nil {
			return fail(t.field, err.Error())
		}
		lines = append(lines, "\t"+t.directive+" "+tok)
	}
	if fe := str("forEach"); fe != "" {
		lines = append(lines, "\tfor_each "+caddyfileToken(fe))
	}
	if d, ok := s.fields["deliver"].(bool); ok {
		lines = append(lines, "\tdeliver "+strconv.FormatBool(d))
	}
	if u, _ := s.fields["allowUnsafeExternalContent"].(bool); u {
		lines = append(lines, "\tallow_unsafe_external_content")
	}
	if n, ok := s.fields["timeoutSeconds"].(float64); ok && n > 0 && n == float64(int64(n)) {
		lines = append(lines, "\ttimeout_seconds "+strconv.FormatInt(int64(n), 10))
	}
	if sm := str("sessionMode"); sm != "" && sm != "isolated" {
		im.note(noteNotPorted, s.key+".sessionMode", "render mode dispatches isolated runs only (use --mode forward for %q)", sm)
	}
	if s.transformMD != "" {
		line := "\ttransform " + caddyfileToken(strings.TrimSpace(s.transformMD))
		if ex := strings.TrimSpace(s.transformEx); ex != "" {
			line += " " + caddyfileToken(ex)
		}
		lines = append(lines, line)
	}
	return lines, true
}

// presetLine ports a preset in render mode: caddyhook's own preset of the
// same name.
func (im *importer) presetLine(s referenceMappingSpec) {
	im.add("presets " + s.preset)
	if gmail, _ := im.hooks["gmail"].(map[string]any); gmail != nil {
		if _, ok := gmail["maxBytes"]; ok {
			im.note(noteNotPorted, "hooks.gmail.maxBytes", "caddyhook's gmail preset keeps the default allowance (6,819,200 bytes) in render mode")
		}
	}
}

// transformsLines confines render-mode transforms to the gateway's own
// transforms directory.
func (im *importer) transformsLines() {
	root := filepath.Join(filepath.Dir(im.file), "hooks", "transforms")
	im.add("transforms_root " + caddyfileToken(root))
	if d, _ := im.hooks["transformsDir"].(string); strings.TrimSpace(d) != "" {
		im.add("transforms_dir " + caddyfileToken(strings.TrimSpace(d)))
	}
	im.note(noteInfo, "hooks.mappings[].transform", "render mode runs transforms in caddyhook's sandbox (no require, process, fs, network or timers); modules that use Node APIs must stay in the gateway (--mode forward)")
}

// caddyShorthand matches a single-brace placeholder, which the Caddyfile
// would expand.
var caddyShorthand = regexp.MustCompile(`(^|[^{])\{[A-Za-z_%?][^{}\s]*\}`)

// templateToken returns a reference template as one Caddyfile token that
// caddyhook reads back as the same template, or why it cannot.
func templateToken(s string) (string, error) {
	switch {
	case strings.Contains(s, "{$"):
		return "", errors.New(`"{$" would be read as a Caddyfile environment variable`)
	case strings.Contains(s, `\n`):
		return "", errors.New(`a literal \n would be read as a newline`)
	case caddyShorthand.MatchString(strings.ReplaceAll(strings.ReplaceAll(s, "{{", "\x00\x00"), "}}", "\x00\x00")):
		return "", errors.New("a single-brace {…} would be read as a Caddy placeholder")
	case strings.Contains(strings.ReplaceAll(s, " ", ""), "{{cel:"):
		return "", errors.New(`"{{cel:" is a payload path to the gateway but CEL to caddyhook`)
	case strings.Contains(s, "`") && strings.Contains(s, `\"`):
		return "", errors.New("it holds both a backquote and \\\" , which no Caddyfile quoting keeps")
	}
	return caddyfileToken(strings.ReplaceAll(s, "\n", `\n`)), nil
}
