package cftoken

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/caddyhook/caddyhook/internal/tmpl"
)

// The Caddyfile that `caddy hooks import` prints is built here and only
// here. It is a tree of cfNodes: directive names are the importer's own
// words, and every argument, whatever its origin, is written by
// Token (through Arg.encode, which also checks what the
// directive reading it will make of it). Write then reads its own
// output back with Caddy's tokenizer and refuses to return a file that does
// not give back exactly the tokens it wrote, on the lines it wrote them.

// Kind says how the directive reading an argument decodes it, and so
// which values it can carry.
type Kind int

const (
	// Plain is an id, path, name, key or number, read as written. It
	// holds no brace (no placeholder of any kind) and no control character.
	Plain Kind = iota
	// Field is a plain string subdirective of a mapping block
	// (match_path, match_source, wake_mode, for_each): read like a
	// template, so a literal \n would come back as a newline.
	Field
	// Template is a mapping template: {{ }} placeholders, written on
	// one line with each newline as \n.
	Template
	// Secret is the importer's own {env.NAME} placeholder for a secret
	// it never copies (envArg); no imported value takes this kind.
	Secret
)

// Arg is one argument of a generated directive.
type Arg struct {
	Val  string
	Kind Kind
}

// PlainArg, FieldArg and TemplateArg make the arguments of each kind.
func PlainArg(s string) Arg    { return Arg{Val: s, Kind: Plain} }
func FieldArg(s string) Arg    { return Arg{Val: s, Kind: Field} }
func TemplateArg(s string) Arg { return Arg{Val: s, Kind: Template} }

// EnvArg is the importer's own {env.NAME} placeholder: the one kind of
// placeholder the generated file holds, for the secrets it never copies.
func EnvArg(name string) Arg { return Arg{Val: "{env." + name + "}", Kind: Secret} }

// PlainArgs makes one plain argument per value.
func PlainArgs(vals []string) []Arg {
	out := make([]Arg, len(vals))
	for i, v := range vals {
		out[i] = PlainArg(v)
	}
	return out
}

// importShorthands is Caddy's own placeholder shorthand expansion, which
// the Caddyfile adapter applies to every token of a site block.
var importShorthands = httpcaddyfile.NewShorthandReplacer()

// encode returns the argument as a Caddyfile token and the text Caddy's
// lexer gives back for it, or why the value cannot be carried: the token,
// after the adapter's shorthand expansion and the directive's own
// decoding, must be exactly the value.
func (a Arg) Encode() (tok, text string, err error) {
	text = a.Val
	switch a.Kind {
	case Secret:
		if !secretEnv.MatchString(a.Val) {
			return "", "", fmt.Errorf("%q is not an {env.NAME} placeholder", a.Val)
		}
		return a.Val, a.Val, nil
	case Template:
		if err := templateRefusal(a.Val); err != nil {
			return "", "", err
		}
		text = strings.ReplaceAll(a.Val, "\n", `\n`)
	default:
		if err := plainRefusal(a.Val); err != nil {
			return "", "", err
		}
		if a.Kind == Field && strings.Contains(a.Val, `\n`) {
			return "", "", errors.New(`a literal \n would be read as a newline`)
		}
	}
	if tok, err = Token(text); err != nil {
		return "", "", err
	}
	if got := a.read(text); got != a.Val {
		return "", "", fmt.Errorf("Caddy would read it as %q", got)
	}
	return tok, text, nil
}

// read is what the adapter and the directive make of a token's text.
func (a Arg) read(text string) string {
	seg := caddyfile.Segment{{Text: text}}
	importShorthands.ApplyToSegment(&seg)
	s := seg[0].Text
	if a.Kind != Plain {
		s = Newlines(RestoreShorthands(s))
	}
	return s
}

// plainRefusal says why s cannot be a plain value: a brace (every Caddy
// placeholder has one) or a control character.
func plainRefusal(s string) error {
	for _, r := range s {
		switch {
		case r == '{' || r == '}':
			return errors.New("a brace would be read as a Caddy placeholder")
		case unicode.IsControl(r):
			return fmt.Errorf("control character %U", r)
		}
	}
	return nil
}

// templateSpan matches a placeholder of a reference template, as the
// gateway finds them.
var templateSpan = regexp.MustCompile(`\{\{[^}]+\}\}`)

// templateRefusal says why a reference template cannot be written so that
// caddyhook reads back the same template.
func templateRefusal(s string) error {
	switch {
	case strings.Contains(s, "{$"):
		return errors.New(`"{$" would be read as a Caddyfile environment variable`)
	case strings.Contains(s, `\n`):
		return errors.New(`a literal \n would be read as a newline`)
	case strings.ContainsAny(templateSpan.ReplaceAllString(s, ""), "{}"):
		return errors.New("a brace outside {{ }} would be read as (part of) a Caddy placeholder")
	case tmpl.UsesCEL(s): // as the template engine reads it, whatever white space precedes cel:
		return errors.New(`"{{cel:" is a payload path to the gateway but CEL to caddyhook`)
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return fmt.Errorf("control character %U", r)
		}
	}
	return nil
}

// secretEnv matches the importer's own secret placeholders.
var secretEnv = regexp.MustCompile(`^\{env\.[A-Z][A-Z0-9_]*\}$`)

// bareToken matches the values written without quotes.
var bareToken = regexp.MustCompile(`^[A-Za-z0-9._~:/@+=,%*-]+$`)

// IsBare reports whether s is written as it is, without quotes: letters,
// digits and . _ ~ : / @ + = , % * - only.
func IsBare(s string) bool { return bareToken.MatchString(s) }

// Token is the one token writer: it returns s as one Caddyfile
// token that Caddy's lexer reads back as exactly s, or why no token can.
// Caddy expands {$VAR} in the file's raw text before it is tokenized,
// quoted or not, so "{$" is refused; so are invalid UTF-8, control and
// bidirectional-control characters (they would hide what the file says
// from whoever reviews it). Of the candidate forms (tokenForms) the first
// is taken that Caddy's own tokenizer reads back as s between two other
// tokens and that Caddy's formatter leaves as it is (so the adapter does
// not warn, and `caddy fmt` cannot change what the file says).
func Token(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", errors.New("not valid UTF-8")
	}
	if strings.Contains(s, "{$") {
		return "", errors.New(`"{$" would be read as a Caddyfile environment variable`)
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\uFEFF') {
			return "", fmt.Errorf("control character %U", r)
		}
	}
	for _, tok := range tokenForms(s) {
		if tokenReadsBack(tok, s) {
			return tok, nil
		}
	}
	return "", errors.New("no Caddyfile token reads back as it")
}

// tokenForms are the ways s may be written, plainest first: bare when s
// is plain; in double quotes when s has no quote or backslash; in
// backquotes when s has no backquote (the lexer escapes nothing there);
// in double quotes with \" escapes when s has neither \" nor a trailing
// backslash (the lexer keeps every other backslash); last a heredoc whose
// marker s does not contain.
func tokenForms(s string) []string {
	var forms []string
	if bareToken.MatchString(s) {
		forms = append(forms, s)
	}
	if !strings.ContainsAny(s, "\"\\") {
		forms = append(forms, `"`+s+`"`)
	}
	if !strings.Contains(s, "`") {
		forms = append(forms, "`"+s+"`")
	}
	if !strings.Contains(s, `\"`) && !strings.HasSuffix(s, `\`) {
		forms = append(forms, `"`+strings.ReplaceAll(s, `"`, `\"`)+`"`)
	}
	marker := "END"
	for i := 2; strings.Contains(s, marker); i++ {
		marker = "END" + strconv.Itoa(i)
	}
	return append(forms, "<<"+marker+"\n"+s+"\n"+marker)
}

// tokenReadsBack reports whether Caddy's tokenizer reads tok, between two
// other tokens, as s, and Caddy's formatter leaves that line unchanged and
// then formats the next line again (it has not taken the token's end for
// something else: it collapses the double space).
func tokenReadsBack(tok, s string) bool {
	line := "a " + tok + " b\n"
	toks, err := caddyfile.Tokenize([]byte(line), "")
	if err != nil || len(toks) != 3 || toks[0].Text != "a" || toks[1].Text != s || toks[2].Text != "b" {
		return false
	}
	return string(caddyfile.Format([]byte(line+"c  d\n"))) == line+"c d\n"
}

// Node is one line of the generated Caddyfile: a directive with its
// arguments and, when block is set, a block of further nodes; or, when
// name is empty, a comment line.
type Node struct {
	Name    string // the importer's own word
	Args    []Arg
	Block   bool
	Body    []Node
	Comment string
}

// directiveName matches the words the importer writes as directive names.
var directiveName = regexp.MustCompile(`^[a-z_]+$`)

// cfWriter renders nodes and records each token it writes.
type cfWriter struct {
	b    strings.Builder
	line int
	want []wantToken
	err  error
}

// wantToken is a token as the lexer must give it back.
type wantToken struct {
	text   string
	line   int
	breaks int // line breaks inside the written token
	quoted bool
}

// token writes one token (enc) that the lexer must read back as text.
func (w *cfWriter) token(enc, text string) {
	breaks := strings.Count(enc, "\n")
	w.want = append(w.want, wantToken{text: text, line: w.line, breaks: breaks, quoted: enc != text})
	w.b.WriteString(enc)
	w.line += breaks
}

// newline ends the current line.
func (w *cfWriter) newline() {
	w.b.WriteByte('\n')
	w.line++
}

// comment writes a comment line: the text escaped so that it stays one
// comment (see CommentText).
func (w *cfWriter) comment(indent int, text string) {
	w.b.WriteString(strings.Repeat("\t", indent) + "#")
	if text != "" {
		w.b.WriteString(" " + CommentText(text))
	}
	w.newline()
}

// node writes n and its block.
func (w *cfWriter) node(indent int, n Node) {
	switch {
	case n.Name == "" && n.Comment == "":
		w.newline()
		return
	case n.Name == "":
		w.comment(indent, n.Comment)
		return
	}
	if !directiveName.MatchString(n.Name) {
		w.fail(fmt.Errorf("%q is not a directive name", n.Name))
		return
	}
	w.b.WriteString(strings.Repeat("\t", indent))
	w.token(n.Name, n.Name)
	for _, a := range n.Args {
		tok, text, err := a.Encode()
		if err != nil {
			w.fail(fmt.Errorf("%s: %q: %w", n.Name, a.Val, err))
			return
		}
		w.b.WriteByte(' ')
		w.token(tok, text)
	}
	if n.Block {
		w.b.WriteByte(' ')
		w.token("{", "{")
	}
	w.newline()
	if n.Block {
		for _, c := range n.Body {
			w.node(indent+1, c)
		}
		w.b.WriteString(strings.Repeat("\t", indent))
		w.token("}", "}")
		w.newline()
	}
}

// fail keeps the first error.
func (w *cfWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// File is a whole generated Caddyfile: header comments, then one site
// block.
type File struct {
	Header []string
	// Site is the site address: the default's env placeholder (written as
	// the importer's own text) or a checked --site.
	Site string
	Body []Node
}

// Write renders f and checks the result with Caddy's tokenizer:
// the same tokens, quoted the same way, on the same lines, and no "{$"
// but the site's own default.
func Write(f File) (string, error) {
	w := &cfWriter{line: 1}
	for _, h := range f.Header {
		w.comment(0, h)
	}
	if len(f.Header) > 0 {
		w.newline()
	}
	w.token(f.Site, f.Site)
	w.b.WriteByte(' ')
	w.token("{", "{")
	w.newline()
	for _, n := range f.Body {
		w.node(1, n)
	}
	w.token("}", "}")
	w.newline()
	if w.err != nil {
		return "", w.err
	}
	out := w.b.String()
	if err := verifyTokens(out, w.want, strings.Count(f.Site, "{$")); err != nil {
		return "", fmt.Errorf("the generated Caddyfile does not read back as written (%w); nothing printed", err)
	}
	if string(caddyfile.Format([]byte(out))) != out {
		return "", errors.New("the generated Caddyfile is not as caddy fmt writes it; nothing printed")
	}
	return out, nil
}

// Text is n alone (and the block it holds) as Write writes it, read back
// as written.
func (n Node) Text() (string, error) {
	w := &cfWriter{line: 1}
	w.node(0, n)
	if w.err != nil {
		return "", w.err
	}
	out := w.b.String()
	if err := verifyTokens(out, w.want, 0); err != nil {
		return "", fmt.Errorf("does not read back as written (%w)", err)
	}
	return out, nil
}

// verifyTokens checks out against the tokens written into it.
func verifyTokens(out string, want []wantToken, envSpans int) error {
	if n := strings.Count(out, "{$"); n != envSpans {
		return fmt.Errorf(`%d "{$" where %d were written`, n, envSpans)
	}
	got, err := caddyfile.Tokenize([]byte(out), "Caddyfile")
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d tokens where %d were written", len(got), len(want))
	}
	for i, g := range got {
		wt := want[i]
		if g.Text != wt.text || g.Line != wt.line || g.Quoted() != wt.quoted || g.NumLineBreaks() != wt.breaks {
			return fmt.Errorf("token %d on line %d: %q, written as %q on line %d", i+1, g.Line, g.Text, wt.text, wt.line)
		}
	}
	return nil
}

// CommentText is s as the text of one comment line: no line break, no
// brace (a "{$" would be expanded even in a comment) and nothing
// unprintable; those are written as \u escapes.
func CommentText(s string) string { return escapeRunes(s, "{}\\") }

// PrintableText is s with every unprintable rune (control, bidirectional
// control, invalid UTF-8) as a \u escape: notes name config keys and
// values, which must not drive the terminal they are printed on.
func PrintableText(s string) string { return escapeRunes(s, "") }

// escapeRunes writes the unprintable runes of s, and those in also, as
// \u escapes.
func escapeRunes(s, also string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsPrint(r) && !strings.ContainsRune(also, r):
			b.WriteRune(r)
		case r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}
