package caddyhook

import (
	"fmt"
	"regexp"
	"strings"
)

// modelList is a compiled allowed_models: the model refs
// (provider/model) and aliases a request's model may name. It accepts
// every spelling the gateway resolves to one of them: any letter case, a
// trailing @<auth profile>, and a bare model name when exactly one listed
// ref has that name (the gateway infers the provider the same way).
type modelList struct {
	exact map[string]struct{} // lower-cased entries, refs and aliases
	bare  map[string]int      // lower-cased model part of each ref → how many refs
}

// newModelList compiles the allowed_models entries.
func newModelList(entries []string) (*modelList, error) {
	m := &modelList{exact: map[string]struct{}{}, bare: map[string]int{}}
	for _, e := range entries {
		ref := strings.ToLower(modelWithoutProfile(e))
		if ref == "" {
			return nil, fmt.Errorf("allowed_models: empty model")
		}
		if prov, name, ok := strings.Cut(ref, "/"); ok && (prov == "" || name == "") {
			return nil, fmt.Errorf("allowed_models: %q: want provider/model or an alias", e)
		}
		if _, dup := m.exact[ref]; dup {
			continue
		}
		m.exact[ref] = struct{}{}
		if _, name, ok := strings.Cut(ref, "/"); ok {
			m.bare[name]++
		}
	}
	return m, nil
}

// allows reports whether model resolves to a listed ref or alias.
func (m *modelList) allows(model string) bool {
	key := strings.ToLower(modelWithoutProfile(model))
	if _, ok := m.exact[key]; ok {
		return true
	}
	if prov, name, ok := strings.Cut(key, "/"); ok {
		// "provider / model" spelled with spaces around the slash
		_, ok := m.exact[strings.TrimSpace(prov)+"/"+strings.TrimSpace(name)]
		return ok
	}
	return m.bare[key] == 1
}

// Auth-profile suffixes that are part of a model name: an 8-digit date
// (model@20250514) and local quantisation tags (model@q4_k_m, @8bit).
var (
	modelDateSuffix  = regexp.MustCompile(`^\d{8}(?:@|$)`)
	modelQuantSuffix = regexp.MustCompile(`(?i)^(?:i?q\d+(?:_[a-z0-9]+)*|\d+bit)(?:@|$)`)
)

// modelWithoutProfile strips a trailing @<auth profile> from a model ref
// as the gateway does, keeping date and quantisation suffixes.
func modelWithoutProfile(raw string) string {
	s := jsTrim(raw)
	if s == "" {
		return ""
	}
	lastSlash := strings.LastIndexByte(s, '/')
	at := indexFrom(s, '@', lastSlash+1)
	if at <= 0 {
		return s
	}
	if modelDateSuffix.MatchString(s[at+1:]) {
		if at = indexFrom(s, '@', at+9); at < 0 {
			return s
		}
	}
	if modelQuantSuffix.MatchString(s[at+1:]) {
		if at = indexFrom(s, '@', at+1); at < 0 {
			return s
		}
	}
	model, profile := jsTrim(s[:at]), jsTrim(s[at+1:])
	if model == "" || profile == "" {
		return s
	}
	return model
}

// indexFrom is strings.IndexByte starting at from (-1 when absent).
func indexFrom(s string, c byte, from int) int {
	if from > len(s) {
		return -1
	}
	if i := strings.IndexByte(s[from:], c); i >= 0 {
		return from + i
	}
	return -1
}
