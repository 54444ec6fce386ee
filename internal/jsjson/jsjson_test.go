package jsjson

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "record testdata/jsonparse.txt from node's JSON.parse")

// genValue writes a random JSON value (valid) of at most depth levels.
func genValue(rnd *rand.Rand, b *strings.Builder, depth int) {
	ws := func() {
		for range rnd.IntN(3) {
			b.WriteByte(" \t\n\r"[rnd.IntN(4)])
		}
	}
	ws()
	switch k := rnd.IntN(9); {
	case k == 0 && depth > 0:
		b.WriteByte('{')
		for i := range rnd.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			genString(rnd, b)
			ws()
			b.WriteByte(':')
			genValue(rnd, b, depth-1)
		}
		ws()
		b.WriteByte('}')
	case k == 1 && depth > 0:
		b.WriteByte('[')
		for i := range rnd.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			genValue(rnd, b, depth-1)
		}
		ws()
		b.WriteByte(']')
	case k == 2:
		genString(rnd, b)
	case k == 3:
		b.WriteString([]string{"true", "false", "null"}[rnd.IntN(3)])
	default:
		b.WriteString([]string{"0", "-0", "1", "-1", "12.5", "1e400", "-1e400", "1E+400", "1e-400", "0.5e-3",
			"123456789012345678901234567890", "2.2250738585072011e-308", "1.7976931348623157e308",
			"1.7976931348623159e308", "9007199254740993", "3"}[rnd.IntN(16)])
	}
	ws()
}

func genString(rnd *rand.Rand, b *strings.Builder) {
	b.WriteByte('"')
	for range rnd.IntN(6) {
		b.WriteString([]string{"a", "é", "\\n", "\\u00e9", "\\ud800", "\\udc00x", "\\\"", "\\\\", "\\/", "✓",
			"\u2028", "\x7f", " ", "k"}[rnd.IntN(14)])
	}
	b.WriteByte('"')
}

// mutate applies a few random edits.
func mutate(rnd *rand.Rand, s string) string {
	const alphabet = "{}[],:\"\\ 0123456789.eE+-tfnul\x00\x01\t\n\v\f\r\x80\xff"
	b := []byte(s)
	for range rnd.IntN(3) + 1 {
		c := alphabet[rnd.IntN(len(alphabet))]
		switch i := rnd.IntN(len(b) + 1); rnd.IntN(3) {
		case 0:
			if i < len(b) {
				b = append(b[:i], b[i+1:]...)
			}
		case 1:
			b = append(b[:i], append([]byte{c}, b[i:]...)...)
		default:
			if i < len(b) {
				b[i] = c
			}
		}
	}
	return string(b)
}

// corpus is the generated cases, the same for every run (their decisions
// are recorded in testdata/jsonparse.txt).
func corpus() []string {
	rnd := rand.New(rand.NewPCG(35, 24))
	var out []string
	for range 2000 {
		var b strings.Builder
		genValue(rnd, &b, 4)
		s := b.String()
		if rnd.IntN(2) == 0 {
			s = mutate(rnd, s)
		}
		out = append(out, s)
	}
	return out
}

// deepCases are nested past encoding/json's depth limit (10,000), with
// numbers beyond float64: the gateway's JSON.parse accepts every one of
// them but the unclosed ones.
func deepCases() []string {
	var out []string
	for _, d := range []int{9999, 10001, 100000} {
		out = append(out, strings.Repeat("[", d)+"1e400"+strings.Repeat("]", d))
		out = append(out, strings.Repeat(`{"a":`, d)+"-1e400"+strings.Repeat("}", d))
		out = append(out, strings.Repeat("[", d)+strings.Repeat("]", d-1))
	}
	return out
}

func decisions(cases []string) string {
	var b strings.Builder
	for _, c := range cases {
		if Valid([]byte(c)) {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	return b.String()
}

// nodeDecisions runs node's JSON.parse on every case ('1' accepted, '0'
// refused), reading each case's bytes as the gateway reads a body
// (Buffer#toString('utf-8')).
func nodeDecisions(t *testing.T, node string, cases []string) string {
	t.Helper()
	enc := make([]string, len(cases))
	for i, c := range cases {
		enc[i] = base64.StdEncoding.EncodeToString([]byte(c))
	}
	data, _ := json.Marshal(enc)
	in := filepath.Join(t.TempDir(), "cases.json")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	const script = `const cases = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
let out = "";
for (const c of cases) {
  try { JSON.parse(Buffer.from(c, "base64").toString("utf-8")); out += "1"; } catch (e) { out += "0"; }
}
process.stdout.write(out);`
	got, err := exec.Command(node, "-e", script, in).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	return string(got)
}

// corpusDigest identifies the corpus the recorded decisions belong to.
func corpusDigest(cases []string) string {
	h := sha256.New()
	for _, c := range cases {
		h.Write([]byte(strconv.Itoa(len(c)) + ":" + c))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TestAgainstJSONParse: Valid accepts exactly what the gateway's
// JSON.parse accepts, over generated JSON (valid and mutated), deep
// nesting and numbers beyond float64 (D24 of issue 35). With node on the
// PATH (CI has it) the decisions are node's own; without, the ones
// recorded from it in testdata/jsonparse.txt (-update rewrites them).
func TestAgainstJSONParse(t *testing.T) {
	cases := corpus()
	table := filepath.Join("testdata", "jsonparse.txt")
	want := ""
	node, err := exec.LookPath("node")
	if err == nil {
		want = nodeDecisions(t, node, cases)
		deep := deepCases()
		if got, w := decisions(deep), nodeDecisions(t, node, deep); got != w {
			t.Errorf("deep cases: Valid %s, JSON.parse %s", got, w)
		}
		if *update {
			if err := os.WriteFile(table, []byte(corpusDigest(cases)+" "+want+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	digest, recorded, _ := strings.Cut(strings.TrimSpace(string(rec)), " ")
	if digest != corpusDigest(cases) {
		t.Fatalf("%s was recorded for another corpus (%s, now %s): run go test ./internal/jsjson -run TestAgainstJSONParse -update with node on the PATH", table, digest, corpusDigest(cases))
	}
	if want == "" {
		t.Log("node not found: comparing with the decisions recorded from it")
		want = recorded
	} else if want != recorded {
		t.Errorf("node's decisions differ from %s: re-record with -update", table)
	}
	got := decisions(cases)
	accepted := strings.Count(want, "1")
	if accepted < len(cases)/4 || accepted > len(cases)*3/4 {
		t.Fatalf("%d of %d cases accepted: the generator does not reach both sides", accepted, len(cases))
	}
	for i := range cases {
		if got[i] != want[i] {
			t.Errorf("case %d %q: Valid %c, JSON.parse %c", i, cases[i], got[i], want[i])
		}
	}
}

// TestDecodeAsEncodingJSON: where encoding/json decodes a text, Decode
// gives the same value; past its limits Decode still decodes
// (numbers as ±Inf, deep values down to MaxDepth).
func TestDecodeAsEncodingJSON(t *testing.T) {
	for i, c := range corpus() {
		var want any
		if json.Unmarshal([]byte(c), &want) != nil {
			continue
		}
		got, err := Decode([]byte(c))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d %q: Decode %#v %v, encoding/json %#v", i, c, got, err, want)
		}
	}
	v, err := Decode([]byte(`{"timeoutSeconds":1e400,"n":-1e400,"s":"a\u00e9"}`))
	m, _ := v.(map[string]any)
	if err != nil || !math.IsInf(m["timeoutSeconds"].(float64), 1) || !math.IsInf(m["n"].(float64), -1) || m["s"] != "aé" {
		t.Fatalf("Decode = %#v %v", v, err)
	}
	deep := strings.Repeat("[", MaxDepth+5) + strings.Repeat("]", MaxDepth+5)
	v, err = Decode([]byte(`{"text":"x","deep":` + deep + `}`))
	if err != nil {
		t.Fatal(err)
	}
	d := v.(map[string]any)["deep"]
	levels := 0
	for {
		a, ok := d.([]any)
		if !ok || len(a) == 0 {
			break
		}
		levels++
		d = a[0]
	}
	if levels != MaxDepth-1 {
		t.Fatalf("deep value decoded %d levels down, want %d", levels, MaxDepth-1)
	}
}

// FuzzDecode: never a panic; Valid and Decode agree; whatever
// encoding/json decodes, Decode decodes alike.
func FuzzDecode(f *testing.F) {
	for _, c := range corpus()[:50] {
		f.Add([]byte(c))
	}
	for _, c := range []string{"", "1e400", "[[[]]]", `{"a":1,"a":2}`, "\"\\ud800\"", "\xff"} {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Decode(data)
		if Valid(data) != (err == nil) {
			t.Fatalf("Valid %v, Decode error %v", Valid(data), err)
		}
		var want any
		if json.Unmarshal(data, &want) == nil && (err != nil || !reflect.DeepEqual(v, want)) {
			t.Fatalf("Decode %#v %v, encoding/json %#v", v, err, want)
		}
	})
}
