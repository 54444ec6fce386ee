package docs

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddyhook/caddyhook/caddyhook"
	"github.com/caddyhook/caddyhook/internal/mdexample"
)

// A caddyfile block's kind, from its info string (docs/testing.md).
const (
	kindComplete = "complete" // ```caddyfile: a whole config
	kindFragment = "fragment" // ```caddyfile fragment=<where>
	kindSyntax   = "syntax"   // ```caddyfile syntax: <placeholders>, checked by TestReloadTableCoversEveryOption
	kindNeeds    = "needs"    // ```caddyfile needs=<module>: a third-party module
)

// fragmentWrap puts a fragment where its info string says it belongs: %s
// is the fragment. The hooks block around a fragment has what a hooks
// handler needs (a token, a gateway), so that it adapts and runs.
var fragmentWrap = map[string]string{
	"global": "{\n%s}\n",
	"site":   "hooks.example.com {\n%s\trespond \"Not Found\" 404\n}\n",
	"hooks": "hooks.example.com {\n\thooks /hooks {\n\t\ttoken {env.HOOK_TOKEN}\n\t\tgateway unix//run/agent-gateway.sock\n" +
		"\t\tgateway_token {env.GATEWAY_TOKEN}\n%s\t}\n\trespond \"Not Found\" 404\n}\n",
	"mapping": "hooks.example.com {\n\thooks /hooks {\n\t\ttoken {env.HOOK_TOKEN}\n\t\tgateway unix//run/agent-gateway.sock\n" +
		"\t\tgateway_token {env.GATEWAY_TOKEN}\n\t\tmapping doc {\n\t\t\tmatch_path doc\n%s\t\t}\n\t}\n\trespond \"Not Found\" 404\n}\n",
}

// caddyfileExample is one caddyfile block of a page.
type caddyfileExample struct {
	page  string
	block mdexample.Block
	kind  string
}

// where names the block in failures: page:line.
func (c caddyfileExample) where() string { return fmt.Sprintf("%s:%d", c.page, c.block.Line) }

// config is the complete Caddyfile the block is or belongs in.
func (c caddyfileExample) config() (string, error) {
	if c.kind == kindComplete {
		return c.block.Text, nil
	}
	wrap, ok := fragmentWrap[c.block.Attrs["fragment"]]
	if !ok {
		return "", fmt.Errorf("fragment=%q: say where it belongs (one of global, site, hooks, mapping)", c.block.Attrs["fragment"])
	}
	return fmt.Sprintf(wrap, c.block.Text), nil
}

// caddyfileExamples returns the caddyfile blocks of the pages with their
// kinds; a block that is more than one kind is an error.
func caddyfileExamples(t *testing.T, pages []page) []caddyfileExample {
	t.Helper()
	var out []caddyfileExample
	for _, p := range pages {
		for _, b := range p.blocks {
			if b.Lang != "caddyfile" {
				continue
			}
			var kinds []string
			for _, k := range []string{kindFragment, kindSyntax, kindNeeds} {
				if b.Has(k) {
					kinds = append(kinds, k)
				}
			}
			c := caddyfileExample{page: p.path, block: b, kind: kindComplete}
			switch len(kinds) {
			case 0:
			case 1:
				c.kind = kinds[0]
			default:
				t.Errorf("%s: a block is one of fragment, syntax or needs, not %v", c.where(), kinds)
			}
			for k := range b.Attrs {
				if !slices.Contains([]string{kindFragment, kindSyntax, kindNeeds, "name"}, k) {
					t.Errorf("%s: unknown word %q in the info string (fragment=, syntax, needs=, name=)", c.where(), k)
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// elision matches the "…" of a config that is not all there.
var elision = regexp.MustCompile(`…|\.\.\.`)

// uncommented drops the comments of Caddyfile text (a # at a line's
// start or after white space), where an ellipsis may stand for prose.
func uncommented(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, "#"); i >= 0 && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			line = line[:i]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestDocsCaddyfiles: every Caddyfile of README.md and docs/*.md adapts as
// written (a fragment inside the complete config it belongs in), none
// elides anything with "…", and a block needing a third-party module says
// which. The counts per page are logged.
func TestDocsCaddyfiles(t *testing.T) {
	chdirRoot(t)
	setSecrets(t)
	pages := readPages(t)
	counts := map[string]map[string]int{}
	for _, c := range caddyfileExamples(t, pages) {
		if counts[c.page] == nil {
			counts[c.page] = map[string]int{}
		}
		counts[c.page][c.kind]++
		switch c.kind {
		case kindSyntax:
			continue
		case kindNeeds:
			if !strings.Contains(c.block.Attrs[kindNeeds], ".") {
				t.Errorf("%s: needs=%q: name the module (its Go import path)", c.where(), c.block.Attrs[kindNeeds])
			}
			continue
		}
		if m := elision.FindString(uncommented(c.block.Text)); m != "" {
			t.Errorf("%s: %q in a Caddyfile that must run as written: write it out, or mark the block ```caddyfile syntax", c.where(), m)
			continue
		}
		cf, err := c.config()
		if err != nil {
			t.Errorf("%s: %v", c.where(), err)
			continue
		}
		if _, warnings, err := adapt(cf, c.where()); err != nil {
			t.Errorf("%s: does not adapt: %v\n%s", c.where(), err, cf)
		} else if len(warnings) > 0 {
			t.Errorf("%s: adapts with warnings %v\n%s", c.where(), warnings, cf)
		}
	}
	total := map[string]int{}
	var rows []string
	for _, p := range pages {
		n := counts[p.path]
		if len(n) == 0 {
			continue
		}
		rows = append(rows, fmt.Sprintf("%-26s complete %2d  fragments %2d  syntax %2d  third-party %d", p.path, n[kindComplete], n[kindFragment], n[kindSyntax], n[kindNeeds]))
		for k, v := range n {
			total[k] += v
		}
	}
	t.Logf("caddyfile blocks:\n%s\n%-26s complete %2d  fragments %2d  syntax %2d  third-party %d", strings.Join(rows, "\n"), "total",
		total[kindComplete], total[kindFragment], total[kindSyntax], total[kindNeeds])
	if total[kindComplete]+total[kindFragment] < 15 {
		t.Fatalf("adapted %d caddyfile blocks: the block reader is broken", total[kindComplete]+total[kindFragment])
	}
}

// adapt runs Caddy's caddyfile adapter on cf; filename names it in errors.
func adapt(cf, filename string) ([]byte, []string, error) {
	out, warns, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), map[string]any{"filename": filename})
	var ws []string
	for _, w := range warns {
		// the pages align their comments, which caddy fmt would not; a
		// fragment is indented for its page, not for where the test puts it
		if !strings.Contains(w.Message, "input is not formatted") {
			ws = append(ws, w.String())
		}
	}
	return out, ws, err
}

// secrets are the variables the pages' configs and commands read: those
// ./dev generates into .cache/dev.env, and the ones the provider and
// openclaw pages ask you to export.
var devSecrets = []string{"HOOK_TOKEN", "GATEWAY_TOKEN", "GITHUB_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRET", "NATS_PASSWORD", "HOOKS_CLUSTER_KEY"}

// otherSecrets are exported by hand in the pages' examples.
var otherSecrets = []string{"SLACK_SIGNING_SECRET", "ACME_WEBHOOK_SECRET", "OPENCLAW_HOOKS_TOKEN",
	"SHOPIFY_WEBHOOK_SECRET", "META_APP_SECRET", "META_VERIFY_TOKEN", "GITLAB_WEBHOOK_TOKEN", "TWILIO_AUTH_TOKEN",
	"FEISHU_VERIFICATION_TOKEN", "FEISHU_ENCRYPT_KEY"}

// setSecrets sets every secret in the environment (Caddy reads {env.*}
// from it) and returns them by name: random hex as ./dev makes them, a
// Standard Webhooks secret as whsec_<base64>.
func setSecrets(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range append(slices.Clone(devSecrets), otherSecrets...) {
		out[name] = randomHex(t, 32)
	}
	out["BILLING_WEBHOOK_SECRET"] = "whsec_" + randomBase64(t, 32)
	out["CLERK_WEBHOOK_SECRET"] = "whsec_" + randomBase64(t, 32)
	for k, v := range out {
		t.Setenv(k, v)
	}
	return out
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
