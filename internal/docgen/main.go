// Command docgen writes docs/reference.md, the configuration reference,
// from the code: the Caddyfile syntax and every option's text are the doc
// comments of the config types (caddyhook's Handler and the types of its
// blocks, the NATS engine's Config, the console), and the option list is
// what the Caddyfile parsers read (internal/optdoc). It also writes the
// providers table of docs/providers.md, between its providers:begin and
// providers:end markers, from the registry (verify.MarkdownTable). Run it
// from the repository root after changing an option, its comment or a
// provider:
//
//	go run ./internal/docgen
//
// TestReferenceIsGenerated and TestProvidersTableIsGenerated fail when the
// committed pages differ.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/doc/comment"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/caddyhook/caddyhook/internal/mdexample"
	"github.com/caddyhook/caddyhook/internal/optdoc"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// The page and the packages it is generated from, relative to the
// repository root.
const (
	referencePage = "docs/reference.md"
	providersPage = "docs/providers.md"
	handlerDir    = "caddyhook"
	natsDir       = "caddyhook/cluster/natscluster"
	verifyDir     = "internal/verify"
	guardDir      = "internal/listenguard"
)

// Command is how the page says to regenerate it.
const Command = "go run ./internal/docgen"

func main() {
	out := flag.String("o", referencePage, "the page to write")
	flag.Parse()
	page, err := Generate(".")
	if err != nil {
		log.Fatalf("docgen: %v", err)
	}
	if err := os.WriteFile(*out, page, 0o644); err != nil {
		log.Fatalf("docgen: %v", err)
	}
	providers, err := ProvidersPage(".")
	if err != nil {
		log.Fatalf("docgen: %v", err)
	}
	if err := os.WriteFile(providersPage, providers, 0o644); err != nil {
		log.Fatalf("docgen: %v", err)
	}
}

// Markers of the generated table in docs/providers.md.
const (
	providersBegin = "<!-- providers:begin -->\n"
	providersEnd   = "<!-- providers:end -->\n"
)

// ProvidersPage returns docs/providers.md (read under root) with the
// registry's table between its markers.
func ProvidersPage(root string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, providersPage))
	if err != nil {
		return nil, err
	}
	page := string(b)
	i, j := strings.Index(page, providersBegin), strings.Index(page, providersEnd)
	if i < 0 || j < i {
		return nil, fmt.Errorf("%s: no %q … %q markers", providersPage, strings.TrimSpace(providersBegin), strings.TrimSpace(providersEnd))
	}
	return []byte(page[:i+len(providersBegin)] + verify.MarkdownTable() + page[j:]), nil
}

// block is one Caddyfile block of the reference: the parser's name for it
// (optdoc.ParserBlocks), its heading, and the Go type its options set.
type block struct {
	name    string
	heading string
	pkg     string // directory of the type's package
	typ     string
	intro   string // one line before the table
}

// blocks are the reference's sections, in order.
var blocks = []block{
	{name: "hooks", heading: "hooks", pkg: handlerDir, typ: "Handler",
		intro: "The options of the `hooks` directive (JSON: the handler `\"handler\": \"hooks\"`)."},
	{name: "mapping", heading: "mapping", pkg: handlerDir, typ: "Mapping",
		intro: "A custom hook, inside `hooks` (repeatable; JSON: an element of `mappings`). See [Mappings and templates](mappings.md)."},
	{name: "transform", heading: "transform", pkg: handlerDir, typ: "TransformRef",
		intro: "A mapping's `transform <module> [<export>]`, or a block with these. See [Transforms](transforms.md)."},
	{name: "verify", heading: "verify", pkg: verifyDir, typ: "Config",
		intro: "A mapping's `verify <provider> { … }`: a provider's signature (or token, or key) instead of the hook token, its endpoint handshake and its form bodies; `caddy hooks providers` lists the providers and the words each reads. See [Providers and signatures](providers.md)."},
	{name: "spool", heading: "spool", pkg: handlerDir, typ: "SpoolConfig",
		intro: "`spool <dir> { … }` or `spool cluster { … }`, inside `hooks`. See [Spool](spool.md) and [Cluster and scaling](cluster.md)."},
	{name: "unauthenticated_bodies", heading: "unauthenticated_bodies", pkg: handlerDir, typ: "UnauthenticatedBodies",
		intro: "`unauthenticated_bodies [<max> [<timeout>]] { per_address <n> }`, inside `hooks`."},
	{name: "events", heading: "events", pkg: handlerDir, typ: "EventsConfig",
		intro: "`events off`, or `events { … }`, inside `hooks`. See [The event log](operations.md#the-event-log)."},
	{name: "cluster", heading: "cluster nats", pkg: natsDir, typ: "Config",
		intro: "`cluster nats [<url>...] { … }`, inside `hooks`: the NATS JetStream engine (`http.handlers.hooks.cluster.nats`). See [Cluster and scaling](cluster.md)."},
	{name: "hooks_console", heading: "hooks_console", pkg: handlerDir, typ: "Console",
		intro: "The `hooks_console` directive (`http.handlers.hooks_console`), in a site behind Caddy's authentication. See [The console](operations.md#the-console)."},
}

// aliases names the fields of a Caddyfile word whose json name differs
// from it (Type.Field for a field of a nested type).
var aliases = map[string][]string{
	"hooks.token":          {"Token", "Tokens"},
	"hooks.mapping":        {"Mappings"},
	"cluster.url":          {"URLs"},
	"cluster.urls":         {"URLs"},
	"cluster.signing_key":  {"SigningKeys"},
	"cluster.signing_keys": {"SigningKeys"},
	"cluster.ca":           {"TLS.CA"},
	"cluster.cert":         {"TLS.Cert"},
	"cluster.key":          {"TLS.Key"},
}

// Generate returns the reference page, reading the sources under root.
func Generate(root string) ([]byte, error) {
	opts, err := optdoc.ParserOptions(filepath.Join(root, handlerDir))
	if err != nil {
		return nil, err
	}
	pkgs := map[string]*optdoc.Package{}
	for _, dir := range []string{handlerDir, natsDir, verifyDir, guardDir} {
		if pkgs[dir], err = optdoc.ReadPackage(filepath.Join(root, dir)); err != nil {
			return nil, err
		}
	}
	handler, ok := pkgs[handlerDir].Types["Handler"]
	if !ok {
		return nil, fmt.Errorf("%s: no Handler type", handlerDir)
	}
	hdoc := splitDoc(handler.Doc)
	if hdoc.sections["Caddyfile"].code == "" {
		return nil, fmt.Errorf("the Handler doc has no \"# Caddyfile\" section with the syntax")
	}

	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Configuration reference\n\n")
	w("Every option of the `hooks` directive and its blocks, of the NATS\n")
	w("cluster engine and of `hooks_console`: the Caddyfile syntax, the JSON\n")
	w("name, and what it does, with its default. How the pieces fit:\n")
	w("[Configuration](configuration.md).\n\n")
	w("This page is generated from the code (the doc comments of the config\n")
	w("types, and the subdirectives the Caddyfile parsers read): do not edit\n")
	w("it; change the comment and run `%s`.\n\n", Command)
	w("## Contents\n\n")
	sections := []string{"Syntax"}
	for _, bl := range blocks {
		sections = append(sections, "`"+bl.heading+"`")
	}
	sections = append(sections, "The hooks app", "Placeholders", "Refusals and handle_errors", "The hooks_lockout event")
	for _, s := range sections {
		w("- [%s](#%s)\n", s, mdexample.Anchor(s))
	}

	w("\n## Syntax\n\n%s\n", markdown(hdoc.intro))
	w("```caddyfile syntax\n%s```\n\n", hdoc.sections["Caddyfile"].code)
	if p := hdoc.sections["Caddyfile"].text; p != "" {
		w("%s\n", markdown(p))
	}

	for _, bl := range blocks {
		typ, ok := pkgs[bl.pkg].Types[bl.typ]
		if !ok {
			return nil, fmt.Errorf("%s: no type %s", bl.pkg, bl.typ)
		}
		w("## `%s`\n\n%s\n\n", bl.heading, bl.intro)
		if d := strings.TrimSpace(typ.Doc); d != "" && bl.typ != "Handler" && bl.typ != "Config" {
			w("%s\n", markdown(d))
		}
		if code := syntaxOf(bl, pkgs); code != "" {
			w("```caddyfile syntax\n%s```\n\n", code)
		}
		var fields map[string]string
		if bl.name == "verify" {
			fields = verifyFields()
		}
		rows, err := optionRows(bl, opts[bl.name], fields, pkgs)
		if err != nil {
			return nil, err
		}
		w("| option | JSON | what it does |\n|---|---|---|\n")
		for _, r := range rows {
			w("| %s | %s | %s |\n", r.option, r.json, r.doc)
		}
		w("\n")
	}

	app, ok := pkgs[guardDir].Types["App"]
	if !ok {
		return nil, fmt.Errorf("%s: no App type", guardDir)
	}
	w("## The hooks app\n\n%s\n", markdown(app.Doc))
	w("## Placeholders\n\n%s\n", markdown(hdoc.sections["Placeholders"].text))
	w("```text\n%s```\n\n", hdoc.sections["Placeholders"].code)
	w("## Refusals and handle_errors\n\n%s\n", markdown(hdoc.sections["Refusals and handle_errors"].text))
	w("## The hooks_lockout event\n\n%s", markdown(hdoc.sections["Events"].text))
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// syntaxOf is the syntax block a section shows besides the hooks one: the
// engine's and the console's parser docs.
func syntaxOf(bl block, pkgs map[string]*optdoc.Package) string {
	switch bl.name {
	case "cluster":
		return splitDoc(pkgs[natsDir].Funcs["NATS.UnmarshalCaddyfile"]).introCode
	case "hooks_console":
		return splitDoc(pkgs[handlerDir].Funcs["parseConsoleCaddyfile"]).introCode
	}
	return ""
}

// row is one line of an option table.
type row struct{ option, json, doc string }

// verifyFields names the JSON field each verify block word sets (the
// registry's table, verify.Words: public_key sets public_keys).
func verifyFields() map[string]string {
	fields := map[string]string{}
	for _, w := range verify.Words() {
		fields[w.Name] = w.Field
	}
	return fields
}

// optionRows is a block's table: a row per field the Caddyfile sets (its
// words merged when several set the same fields), in the type's field
// order, then the fields only JSON (or the directive's arguments) set.
// fields, when set, names the JSON field of each word.
func optionRows(bl block, words []string, fields map[string]string, pkgs map[string]*optdoc.Package) ([]row, error) {
	typ := pkgs[bl.pkg].Types[bl.typ]
	type entry struct {
		words  []string
		fields []optdoc.Field
		jsons  []string
		first  int // index of the first field in the type
	}
	var entries []*entry
	byKey := map[string]*entry{}
	used := map[string]bool{}
	for _, word := range words {
		names, ok := aliases[bl.name+"."+word]
		if !ok {
			json := word
			if f, ok := fields[word]; ok {
				json = f
			}
			i := slices.IndexFunc(typ.Fields, func(f optdoc.Field) bool { return f.JSON == json })
			if i < 0 {
				return nil, fmt.Errorf("%s: the Caddyfile parser reads %q, and %s has no field with that json name: name it in docgen's aliases", bl.name, word, bl.typ)
			}
			names = []string{typ.Fields[i].Name}
		}
		key := strings.Join(names, ",")
		e, ok := byKey[key]
		if !ok {
			e = &entry{first: len(typ.Fields)}
			for _, n := range names {
				f, json, idx, err := lookup(typ, pkgs[bl.pkg], n)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %v", bl.name, word, err)
				}
				if strings.TrimSpace(f.Doc) == "" {
					return nil, fmt.Errorf("%s.%s: the field %s.%s has no doc comment", bl.name, word, bl.typ, n)
				}
				e.fields = append(e.fields, f)
				e.jsons = append(e.jsons, json)
				e.first = min(e.first, idx)
				used[strings.SplitN(n, ".", 2)[0]] = true
			}
			byKey[key] = e
			entries = append(entries, e)
		}
		e.words = append(e.words, word)
	}
	for i, f := range typ.Fields {
		if used[f.Name] || f.JSON == "" || f.JSON == "-" || !isExported(f.Name) {
			continue
		}
		entries = append(entries, &entry{fields: []optdoc.Field{f}, jsons: []string{f.JSON}, first: i})
	}
	slices.SortStableFunc(entries, func(a, b *entry) int { return a.first - b.first })
	var rows []row
	for _, e := range entries {
		r := row{option: "—", json: codeList(e.jsons)}
		if len(e.words) > 0 {
			r.option = codeList(e.words)
		}
		var docs []string
		for _, f := range e.fields {
			if d := oneLine(withConsts(f.Doc, pkgs[bl.pkg].Consts)); !slices.Contains(docs, d) {
				docs = append(docs, d)
			}
		}
		r.doc = strings.Join(docs, " ")
		if n := len(rows); n > 0 && rows[n-1].doc == r.doc {
			// fields that share one comment (Channel, To, Model and Thinking) share a row
			rows[n-1].option += ", " + r.option
			rows[n-1].json += ", " + r.json
			continue
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// lookup finds a field by Go name, or Type.Field through a field of that
// name (TLS.CA: the CA field of the type of the TLS field); it returns
// the field, its JSON path and the index of the field in typ.
func lookup(typ *optdoc.Type, pkg *optdoc.Package, name string) (optdoc.Field, string, int, error) {
	outer, inner, nested := strings.Cut(name, ".")
	i := slices.IndexFunc(typ.Fields, func(f optdoc.Field) bool { return f.Name == outer })
	if i < 0 {
		return optdoc.Field{}, "", 0, fmt.Errorf("%s has no field %s", typ.Name, outer)
	}
	f := typ.Fields[i]
	if !nested {
		return f, f.JSON, i, nil
	}
	nt, ok := pkg.Types[outer]
	if !ok {
		return optdoc.Field{}, "", 0, fmt.Errorf("no type %s for %s", outer, name)
	}
	g, ok := nt.Field(inner)
	if !ok {
		return optdoc.Field{}, "", 0, fmt.Errorf("%s has no field %s", outer, inner)
	}
	return g, f.JSON + "." + g.JSON, i, nil
}

// constWord matches a Go identifier in a doc comment.
var constWord = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]*\b`)

// withConsts writes the value of each of the package's constants a doc
// names in place of its name ("1 to MaxSecrets" → "1 to 8").
func withConsts(doc string, consts map[string]string) string {
	return constWord.ReplaceAllStringFunc(doc, func(w string) string {
		if v, ok := consts[w]; ok {
			return v
		}
		return w
	})
}

// isExported reports an exported Go name.
func isExported(name string) bool { return name != "" && name[0] >= 'A' && name[0] <= 'Z' }

// codeList writes names as code, separated by commas.
func codeList(names []string) string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, "`"+n+"`")
	}
	return strings.Join(out, ", ")
}

// splitDocResult is a doc comment cut at its headings: the text and the
// code of the part before the first heading, and of each section.
type splitDocResult struct {
	intro     string
	introCode string
	sections  map[string]section
}

// section is the text and code of one headed part of a doc comment.
type section struct{ text, code string }

// splitDoc parses a doc comment (go/doc/comment) and cuts it at its
// headings.
func splitDoc(text string) splitDocResult {
	var p comment.Parser
	d := p.Parse(text)
	out := splitDocResult{sections: map[string]section{}}
	cur := ""
	var txt, code strings.Builder
	flush := func() {
		if cur == "" {
			out.intro, out.introCode = txt.String(), code.String()
		} else {
			out.sections[cur] = section{text: txt.String(), code: code.String()}
		}
		txt.Reset()
		code.Reset()
	}
	var pr comment.Printer
	for _, blk := range d.Content {
		switch x := blk.(type) {
		case *comment.Heading:
			flush()
			cur = strings.TrimSpace(strings.TrimLeft(string(pr.Text(&comment.Doc{Content: []comment.Block{x}})), "# "))
		case *comment.Code:
			code.WriteString(x.Text)
		default:
			txt.Write(pr.Text(&comment.Doc{Content: []comment.Block{x}}))
			txt.WriteString("\n")
		}
	}
	flush()
	return out
}

// markdown turns plain doc text (paragraphs separated by blank lines)
// into Markdown paragraphs, escaped.
func markdown(text string) string {
	var out []string
	for para := range strings.SplitSeq(strings.TrimSpace(text), "\n\n") {
		if para = strings.TrimSpace(para); para != "" {
			out = append(out, escape(strings.Join(strings.Fields(para), " ")))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n\n") + "\n"
}

// oneLine is a field's doc as one escaped line, for a table cell.
func oneLine(doc string) string {
	return escape(strings.Join(strings.Fields(doc), " "))
}

// escape makes doc text safe as Markdown outside code spans (the text
// between backquotes is kept as it is): <, > and * are written as
// entities or escaped, | is escaped for the tables, and Go doc links
// [Name] lose their brackets.
func escape(s string) string {
	parts := strings.Split(s, "`")
	for i := 0; i < len(parts); i += 2 { // outside code spans
		t := parts[i]
		t = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "*", `\*`, "|", `\|`).Replace(t)
		parts[i] = docLinks(t)
	}
	for i := 1; i < len(parts); i += 2 {
		parts[i] = strings.ReplaceAll(parts[i], "|", `\|`)
	}
	return strings.Join(parts, "`")
}

// docLinks drops the brackets of Go doc links ([Result.DeliveryID]).
func docLinks(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '[')
		j := strings.IndexByte(s[max(i, 0):], ']')
		if i < 0 || j < 0 {
			b.WriteString(s)
			return b.String()
		}
		name := s[i+1 : i+j]
		if name != "" && isExported(name) && !strings.ContainsAny(name, " <>") {
			b.WriteString(s[:i])
			b.WriteString(name)
		} else {
			b.WriteString(s[:i+j+1])
		}
		s = s[i+j+1:]
	}
}
