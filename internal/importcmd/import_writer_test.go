package importcmd_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddyhook/caddyhook/caddyhook"
	"github.com/caddyhook/caddyhook/internal/cftoken"
	"github.com/caddyhook/caddyhook/internal/importcmd"
)

// tokenFragments are what the generated strings of the property test are
// made of: everything Caddy's lexer, its env expansion, its shorthand
// expansion or caddyhook's own template decoding treats specially.
var tokenFragments = []string{
	`"`, "`", `\`, `\"`, `\\`, "{", "}", "{}", "{$", "{$HOME}", "{$A:b}", "{env.HOME}", "{file./etc/passwd}",
	"{path}", "{{path}}", "{{ payload.x }}", "{header.X}", "{{", "}}", "#", " #", "\n", "\t", " ", "\r",
	"<<", "<<EOF\n", "EOF", "END", "END2", "\nEND", "import", "(snip)", ":", "/", "%2F", `\n`, "$", "@m",
	"é", "✓", "😀", "\u00a0", "\u2028", "\u202e", "\ufeff", "\x00", "\x1b", "\xff", "a", "Z", "0", "-", "hook:",
}

// randomTokenString builds one string of 1 to 8 fragments.
func randomTokenString(r *rand.Rand) string {
	var b strings.Builder
	for n := 1 + r.IntN(8); n > 0; n-- {
		if r.IntN(6) == 0 {
			b.WriteRune(rune(r.IntN(0x3000)))
			continue
		}
		b.WriteString(tokenFragments[r.IntN(len(tokenFragments))])
	}
	return b.String()
}

// TestImportTokenRoundTrip is the property test of the one token writer:
// for 3,000 generated strings and every attack string, cftoken.Token
// either refuses the string or gives a token that Caddy's own tokenizer
// reads back as that string, as one token, wherever it stands on a line;
// and every argument kind either refuses the value or survives Caddy's
// Caddyfile adapter and the hooks directive unchanged.
func TestImportTokenRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 26))
	cases := append(append([]string{""}, importInjectionAttacks...), importPlaceholderAttacks...)
	for range 3000 {
		cases = append(cases, randomTokenString(r))
	}
	written := 0
	for _, s := range cases {
		if checkTokenRoundTrip(t, s) {
			written++
		}
	}
	// the property must not hold by refusing everything
	if written < len(cases)/3 {
		t.Fatalf("only %d of %d strings written", written, len(cases))
	}
}

// FuzzImportToken fuzzes the same property (go test -fuzz
// FuzzImportToken); its seed corpus, run by every go test, is the attack
// strings.
func FuzzImportToken(f *testing.F) {
	for _, s := range append(append([]string{""}, importInjectionAttacks...), importPlaceholderAttacks...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkTokenRoundTrip(t, s) })
}

// checkTokenRoundTrip checks s through the writer at the lexer and at the
// adapter; it reports whether cftoken.Token wrote s.
func checkTokenRoundTrip(t *testing.T, s string) bool {
	t.Helper()
	tok, err := cftoken.Token(s)
	if err != nil {
		if err.Error() == "" {
			t.Fatalf("%q refused without a reason", s)
		}
		// refused only for what no token can carry, or should not hide
		if utf8.ValidString(s) && !strings.Contains(s, "{$") && !strings.ContainsFunc(s, func(r rune) bool {
			return r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\ufeff')
		}) {
			t.Errorf("%q refused: %v", s, err)
		}
		return false
	}
	// the lexer: one token, the same text, before, between and after others
	const self = "\x00"
	for _, parts := range [][]string{{self}, {"a", self}, {"a", self, "b"}, {self, "{", "}"}, {"a", self, self}} {
		var line []string
		for _, p := range parts {
			if p == self {
				p = tok
			}
			line = append(line, p)
		}
		src := strings.Join(line, " ")
		if parts[len(parts)-1] == "}" {
			src = tok + " {\n}"
		}
		got, err := caddyfile.Tokenize([]byte(src+"\n"), "Caddyfile")
		if err != nil {
			t.Errorf("%q in %q: %v", s, src, err)
			continue
		}
		if len(got) != len(parts) {
			t.Errorf("%q in %q: %d tokens, want %d", s, src, len(got), len(parts))
			continue
		}
		for i, p := range parts {
			if p == self {
				p = s
			}
			if got[i].Text != p {
				t.Errorf("%q in %q: token %d is %q, want %q", s, src, i, got[i].Text, p)
			}
		}
	}
	// the adapter and the hooks directive, for every argument kind
	for _, kind := range []cftoken.Kind{cftoken.Plain, cftoken.Field, cftoken.Template} {
		a := cftoken.Arg{Val: s, Kind: kind}
		if _, _, err := a.Encode(); err != nil {
			continue
		}
		h := adaptedArg(t, a)
		if h == nil {
			continue
		}
		var got []string
		switch kind {
		case cftoken.Plain:
			got = append([]string{h.Mappings[0].ID}, h.Agents...)
			if want := []string{s, "a", s, "b"}; strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Errorf("plain %q came back as %q", s, got)
			}
		case cftoken.Field:
			if h.Mappings[0].MatchSource != s {
				t.Errorf("mapping field %q came back as %q", s, h.Mappings[0].MatchSource)
			}
		case cftoken.Template:
			if h.Mappings[0].MessageTemplate != s {
				t.Errorf("template %q came back as %q", s, h.Mappings[0].MessageTemplate)
			}
		}
	}
	return true
}

// adaptedArg writes a into a Caddyfile through the writer (as a mapping
// id and agents for plain values, match_source for mapping fields,
// message_template for templates), adapts it with Caddy's Caddyfile
// adapter and returns the hooks handler.
func adaptedArg(t *testing.T, a cftoken.Arg) *caddyhook.Handler {
	t.Helper()
	var body []cftoken.Node
	mapping := cftoken.Node{Name: "mapping", Args: []cftoken.Arg{cftoken.PlainArg("m")}, Block: true}
	switch a.Kind {
	case cftoken.Plain:
		body = append(body, cftoken.Node{Name: "agents", Args: []cftoken.Arg{cftoken.PlainArg("a"), a, cftoken.PlainArg("b")}})
		mapping.Args = []cftoken.Arg{a}
	case cftoken.Field:
		mapping.Body = append(mapping.Body, cftoken.Node{Name: "match_source", Args: []cftoken.Arg{a}})
	case cftoken.Template:
		mapping.Body = append(mapping.Body, cftoken.Node{Name: "message_template", Args: []cftoken.Arg{a}})
	}
	body = append(body, cftoken.Node{Name: "token", Args: []cftoken.Arg{cftoken.EnvArg(importcmd.HookTokenEnv)}}, mapping)
	out, err := cftoken.Write(cftoken.File{Site: "example.com", Body: []cftoken.Node{{Name: "hooks", Block: true, Body: body}}})
	if err != nil {
		t.Errorf("%q (kind %d): %v", a.Val, a.Kind, err)
		return nil
	}
	cfgJSON, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(out), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Errorf("%q (kind %d): adapt: %v\n%s", a.Val, a.Kind, err, out)
		return nil
	}
	for _, w := range warnings {
		t.Errorf("%q (kind %d): adapt warning: %s\n%s", a.Val, a.Kind, w.String(), out)
	}
	h, err := adaptedHandler(t, cfgJSON)
	if err != nil || len(h.Mappings) != 1 {
		t.Errorf("%q (kind %d): not one hooks handler with one mapping: %s", a.Val, a.Kind, cfgJSON)
		return nil
	}
	return &h
}
