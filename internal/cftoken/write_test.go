package cftoken

import (
	"strings"
	"testing"
	"unicode"

	"github.com/caddyhook/caddyhook/internal/tmpl"
)

// TestTemplateCELRefusalReadsAsTheEngine reproduces issue 34 item B12: a
// reference template is a payload path to the gateway, so `caddy hooks
// import` refuses one that caddyhook would run as CEL. The refusal
// removed ASCII spaces only, so "{{\tcel: …}}", "{{\u00a0cel: …}}" and
// "{{\u3000cel: …}}" were written to the Caddyfile and ran as CEL at the
// edge. It now asks the template engine (tmpl.UsesCEL): every character
// the engine skips before "cel:" is refused, any other is written, and
// what is written reads back as written.
func TestTemplateCELRefusalReadsAsTheEngine(t *testing.T) {
	for _, s := range []string{"{{\tcel: payload.x }}", "{{\u00a0cel: payload.x }}", "{{\u3000cel: payload.x }}", "m {{ cel:1}}"} {
		if _, _, err := TemplateArg(s).Encode(); err == nil || !strings.Contains(err.Error(), "CEL to caddyhook") {
			t.Errorf("%q: Encode = %v, want the CEL refusal", s, err)
		}
	}
	refused := 0
	for r := rune(1); r <= unicode.MaxRune; r++ {
		if !unicode.IsSpace(r) && !unicode.In(r, unicode.Zs, unicode.Cf) && r > 0x7F {
			continue
		}
		s := "{{" + string(r) + "cel: payload.x }}"
		_, _, err := TemplateArg(s).Encode()
		cel := err != nil && strings.Contains(err.Error(), "CEL to caddyhook")
		if cel != tmpl.UsesCEL(s) {
			t.Fatalf("%q (U+%04X): refused as CEL %v (%v), the engine reads CEL %v", s, r, cel, err, tmpl.UsesCEL(s))
		}
		if cel {
			refused++
		}
	}
	if refused < 20 {
		t.Fatalf("only %d white space characters refused", refused)
	}
}
