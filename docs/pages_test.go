package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/mdexample"
)

// page is one documentation page, read from the repository root.
type page struct {
	path   string // relative to the repository root: README.md, docs/x.md
	text   string
	blocks []mdexample.Block
}

// readPages reads README.md and docs/*.md; the test runs from the
// repository root (see chdirRoot).
func readPages(t *testing.T) []page {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append([]string{"README.md"}, paths...)
	var out []page
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page{path: p, text: string(b), blocks: mdexample.Blocks(string(b))})
	}
	if len(out) < 10 {
		t.Fatalf("read %d pages: README.md and docs/*.md expected", len(out))
	}
	return out
}

// chdirRoot makes the repository root the working directory, as `./dev`
// and the pages' commands assume.
func chdirRoot(t *testing.T) {
	t.Helper()
	t.Chdir("..")
	if _, err := os.Stat("go.mod"); err != nil {
		t.Fatalf("not at the repository root: %v", err)
	}
}

// externalLink matches a link with a scheme (https:, mailto:, …).
var externalLink = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// TestDocsLinks: every relative link of README.md and docs/*.md names a
// file of the repository, and every #anchor a heading of its page.
func TestDocsLinks(t *testing.T) {
	chdirRoot(t)
	anchors := map[string][]string{} // page path → its anchors
	for _, p := range readPages(t) {
		for _, h := range mdexample.Headings(p.text) {
			anchors[p.path] = append(anchors[p.path], h.Anchor)
		}
	}
	links := 0
	for _, p := range readPages(t) {
		for _, l := range mdexample.Links(p.text) {
			if externalLink.MatchString(l.Target) {
				continue
			}
			links++
			file, frag, _ := strings.Cut(l.Target, "#")
			target := p.path
			if file != "" {
				target = filepath.Join(filepath.Dir(p.path), file)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link %s: %v", p.path, l.Line, l.Target, err)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			have, ok := anchors[target]
			if !ok {
				t.Errorf("%s:%d: link %s: anchors of %s are not checked (not README.md or docs/*.md)", p.path, l.Line, l.Target, target)
				continue
			}
			if !slices.Contains(have, frag) {
				t.Errorf("%s:%d: link %s: %s has no heading with the anchor #%s", p.path, l.Line, l.Target, target, frag)
			}
		}
	}
	if links < 100 {
		t.Fatalf("checked %d relative links: the link reader is broken", links)
	}
	t.Logf("%d relative links resolved", links)
}

// contentsItem matches one entry of a Contents list: - [text](#anchor).
var contentsItem = regexp.MustCompile(`^- \[.*\]\(#([^)]+)\)$`)

// TestDocsContents: every page of docs/ starts with its title and lists
// its sections (the ## headings, in order) under "## Contents".
func TestDocsContents(t *testing.T) {
	chdirRoot(t)
	for _, p := range readPages(t) {
		if p.path == "README.md" {
			continue
		}
		heads := mdexample.Headings(p.text)
		if len(heads) == 0 || heads[0].Level != 1 || heads[0].Line != 1 {
			t.Errorf("%s: the page must start with its title (# …)", p.path)
			continue
		}
		var sections []string
		for _, h := range heads {
			if h.Level == 2 && h.Text != "Contents" {
				sections = append(sections, h.Anchor)
			}
		}
		_, rest, ok := strings.Cut(p.text, "\n## Contents\n\n")
		if !ok {
			t.Errorf("%s: no \"## Contents\" section", p.path)
			continue
		}
		var listed []string
		for _, line := range strings.Split(rest, "\n") {
			m := contentsItem.FindStringSubmatch(line)
			if m == nil {
				break
			}
			listed = append(listed, m[1])
		}
		if !slices.Equal(listed, sections) {
			t.Errorf("%s: Contents lists %q; the sections are %q", p.path, listed, sections)
		}
	}
}
