// Package mdexample reads what the documentation's tests need from a
// Markdown page: its fenced code blocks (with their info strings and the
// HTML comments just before them, which say how a block is run), its
// headings with the anchors GitHub gives them, and its links. It reads the
// subset of Markdown the README and docs/ use (fences of three or more
// backquotes at the start of a line, ATX headings, inline links) and needs
// nothing of the handler.
package mdexample

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Block is one fenced code block.
type Block struct {
	Line int    // 1-based line of the opening fence
	Lang string // the info string's first word ("caddyfile", "sh", …)
	// Attrs are the info string's other words: key=value, or a bare word
	// with an empty value ("syntax").
	Attrs map[string]string
	// Directives are the HTML comments on the lines just before the fence
	// (blank lines between them are allowed, text is not), in order.
	Directives []Directive
	Text       string // the block's lines, each ending in a newline
}

// Directive is one HTML comment before a block: `<!-- name k=v k2 -->`.
type Directive struct {
	Name  string
	Attrs map[string]string
	Line  int
}

// Has reports whether the info string carries the bare word or key.
func (b Block) Has(key string) bool {
	_, ok := b.Attrs[key]
	return ok
}

// Blocks returns the fenced code blocks of a page, in order. An
// unterminated fence runs to the end of the page.
func Blocks(page string) []Block {
	lines := strings.Split(page, "\n")
	var out []Block
	var pending []Directive // comments since the last text line
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		fence, info, ok := openingFence(line)
		if !ok {
			switch {
			case trimmed == "":
			case strings.HasPrefix(trimmed, "<!--") && strings.HasSuffix(trimmed, "-->"):
				pending = append(pending, parseDirective(trimmed, i+1))
			default:
				pending = nil
			}
			continue
		}
		b := Block{Line: i + 1, Attrs: map[string]string{}, Directives: pending}
		pending = nil
		words := strings.Fields(info)
		if len(words) > 0 {
			b.Lang = words[0]
			b.Attrs = attrs(words[1:])
		}
		var text strings.Builder
		for i++; i < len(lines); i++ {
			if closes(lines[i], fence) {
				break
			}
			text.WriteString(lines[i])
			text.WriteByte('\n')
		}
		b.Text = text.String()
		out = append(out, b)
	}
	return out
}

// openingFence reports a line that opens a fenced block: its fence (the
// backquotes) and its info string.
func openingFence(line string) (fence, info string, ok bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || !strings.HasPrefix(t, "```") {
		return "", "", false
	}
	n := len(t) - len(strings.TrimLeft(t, "`"))
	if strings.Contains(t[n:], "`") {
		return "", "", false // an info string has no backquote: this is inline code
	}
	return t[:n], strings.TrimSpace(t[n:]), true
}

// closes reports a line that closes a block opened with fence: only
// backquotes, at least as many.
func closes(line, fence string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, fence) && strings.TrimLeft(t, "`") == ""
}

// parseDirective reads `<!-- name k=v … -->`.
func parseDirective(comment string, line int) Directive {
	body := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(comment, "<!--"), "-->"))
	words := strings.Fields(body)
	d := Directive{Line: line, Attrs: map[string]string{}}
	if len(words) > 0 {
		d.Name = words[0]
		d.Attrs = attrs(words[1:])
	}
	return d
}

// attrs reads key=value words (a bare word has an empty value).
func attrs(words []string) map[string]string {
	m := make(map[string]string, len(words))
	for _, w := range words {
		k, v, _ := strings.Cut(w, "=")
		m[k] = v
	}
	return m
}

// Heading is one ATX heading outside code blocks.
type Heading struct {
	Level  int
	Text   string // as written, inline code included
	Anchor string // the id GitHub gives it (unique on the page)
	Line   int
}

// Headings returns the headings of a page, outside fenced code, with
// their anchors.
func Headings(page string) []Heading {
	var out []Heading
	seen := map[string]int{}
	forEachTextLine(page, func(line string, n int) {
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			return
		}
		text := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[level:]), "#"))
		out = append(out, Heading{Level: level, Text: text, Anchor: anchor(text, seen), Line: n})
	})
	return out
}

// anchor is Anchor made unique on a page: a repeated id gets -1, -2, …
// appended, as GitHub does.
func anchor(text string, seen map[string]int) string {
	id := Anchor(text)
	n := seen[id]
	seen[id] = n + 1
	if n > 0 {
		return id + "-" + strconv.Itoa(n)
	}
	return id
}

// Anchor is GitHub's id for a heading: lower case, every character that
// is not a letter, digit, mark, underscore, hyphen or space dropped,
// spaces made hyphens.
func Anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Link is one inline link or image target outside code.
type Link struct {
	Target string
	Line   int
}

// linkTarget matches the target of an inline link or image: ](target).
var linkTarget = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// codeSpan matches an inline code span.
var codeSpan = regexp.MustCompile("`+[^`]*`+")

// Links returns the link targets of a page outside fenced code and code
// spans. A link whose text spans lines is found on the line of its target.
func Links(page string) []Link {
	var out []Link
	forEachTextLine(page, func(line string, n int) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range linkTarget.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Target: m[1], Line: n})
		}
	})
	return out
}

// forEachTextLine calls f with every line outside fenced code blocks and
// its 1-based number.
func forEachTextLine(page string, f func(line string, n int)) {
	fence := ""
	for i, line := range strings.Split(page, "\n") {
		if fence != "" {
			if closes(line, fence) {
				fence = ""
			}
			continue
		}
		if fc, _, ok := openingFence(line); ok {
			fence = fc
			continue
		}
		f(line, i+1)
	}
}
