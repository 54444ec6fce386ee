package optdoc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestParserOptions reads the real parsers: every block of ParserBlocks
// has options, and a few known ones are where they belong.
func TestParserOptions(t *testing.T) {
	got, err := ParserOptions(filepath.Join("..", "..", "caddyhook"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range ParserBlocks {
		if len(got[block]) == 0 {
			t.Errorf("block %s: no options read", block)
		}
	}
	for block, opt := range map[string]string{"hooks": "gateway_token", "mapping": "match_expr", "verify": "timestamp_header",
		"spool": "fallback", "events": "max_rejections", "cluster": "signing_key", "hooks_console": "insecure_no_auth",
		"unauthenticated_bodies": "per_address", "transform": "export"} {
		if !slices.Contains(got[block], opt) {
			t.Errorf("block %s: %q not read (got %v)", block, opt, got[block])
		}
	}
	if slices.Contains(got["events"], "off") {
		t.Error("events off is a value, not a subdirective")
	}
}

// TestReadPackage: fields keep their json names and docs, a field on the
// line after a documented one shares its doc, exported constants show
// their values.
func TestReadPackage(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import "time"

const (
	// MaxThings bounds things.
	MaxThings = 8
	DefaultWait = 300 * time.Second
	notExported = 3
)

// Conf is a config.
type Conf struct {
	// A is a.
	A string ` + "`json:\"a,omitempty\"`" + `

	// B and C share a comment.
	B int ` + "`json:\"b\"`" + `
	C int ` + "`json:\"c\"`" + `

	D int ` + "`json:\"d\"`" + `
	e int
}

// Load does it.
func (c *Conf) Load() {}
`
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := ReadPackage(dir)
	if err != nil {
		t.Fatal(err)
	}
	conf := p.Types["Conf"]
	if conf == nil || conf.Doc != "Conf is a config.\n" {
		t.Fatalf("Conf: %+v", conf)
	}
	want := []Field{{"A", "a", "A is a.\n"}, {"B", "b", "B and C share a comment.\n"}, {"C", "c", "B and C share a comment.\n"}, {"D", "d", ""}, {"e", "", ""}}
	if !slices.Equal(conf.Fields, want) {
		t.Errorf("fields %+v, want %+v", conf.Fields, want)
	}
	if p.Funcs["Conf.Load"] != "Load does it.\n" {
		t.Errorf("method doc %q", p.Funcs["Conf.Load"])
	}
	if p.Consts["MaxThings"] != "8" || p.Consts["DefaultWait"] != "5m0s" || p.Consts["notExported"] != "" {
		t.Errorf("consts %v", p.Consts)
	}
}
