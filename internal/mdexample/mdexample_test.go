package mdexample

import (
	"reflect"
	"testing"
)

const page = "# Title\n" +
	"\n" +
	"Intro with a [link](other.md#part) and `[not](a-link)`.\n" +
	"\n" +
	"## Two: `caddy hooks test`\n" +
	"\n" +
	"<!-- request config=ops status=200,404 -->\n" +
	"\n" +
	"<!-- request config=Caddyfile.example status=200 -->\n" +
	"```sh\n" +
	"curl -s localhost:8080\n" +
	"# ## not a heading\n" +
	"```\n" +
	"\n" +
	"text between\n" +
	"  ```` ```caddyfile ```` is inline code, not a fence\n" +
	"```caddyfile fragment=hooks name=gh\n" +
	"mapping gh {\n" +
	"}\n" +
	"````\n" +
	"\n" +
	"## Two: `caddy hooks test`\n" +
	"### Ünïcode (JS and TS) — 50%\n" +
	"![img](console.png)\n"

func TestBlocks(t *testing.T) {
	got := Blocks(page)
	if len(got) != 2 {
		t.Fatalf("%d blocks, want 2: %+v", len(got), got)
	}
	sh := got[0]
	if sh.Lang != "sh" || sh.Line != 10 || sh.Text != "curl -s localhost:8080\n# ## not a heading\n" {
		t.Errorf("first block: %+v", sh)
	}
	want := []Directive{
		{Name: "request", Attrs: map[string]string{"config": "ops", "status": "200,404"}, Line: 7},
		{Name: "request", Attrs: map[string]string{"config": "Caddyfile.example", "status": "200"}, Line: 9},
	}
	if !reflect.DeepEqual(sh.Directives, want) {
		t.Errorf("directives: %+v, want %+v", sh.Directives, want)
	}
	cf := got[1]
	if cf.Lang != "caddyfile" || !cf.Has("fragment") || cf.Attrs["fragment"] != "hooks" || cf.Attrs["name"] != "gh" || cf.Has("syntax") {
		t.Errorf("second block: %+v", cf)
	}
	if len(cf.Directives) != 0 {
		t.Errorf("text between the comment and the block must drop it: %+v", cf.Directives)
	}
	if cf.Text != "mapping gh {\n}\n" {
		t.Errorf("a longer closing fence closes the block: %q", cf.Text)
	}
}

func TestHeadings(t *testing.T) {
	var anchors []string
	for _, h := range Headings(page) {
		anchors = append(anchors, h.Anchor)
	}
	want := []string{"title", "two-caddy-hooks-test", "two-caddy-hooks-test-1", "ünïcode-js-and-ts--50"}
	if !reflect.DeepEqual(anchors, want) {
		t.Errorf("anchors %q, want %q", anchors, want)
	}
}

func TestLinks(t *testing.T) {
	want := []Link{{Target: "other.md#part", Line: 3}, {Target: "console.png", Line: 24}}
	if got := Links(page); !reflect.DeepEqual(got, want) {
		t.Errorf("links %+v, want %+v", got, want)
	}
}
