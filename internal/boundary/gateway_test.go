//go:build openclaw

package boundary

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// locateGateway returns the Node binary and the openclaw package directory:
// from CADDYHOOK_OPENCLAW_BIN (and CADDYHOOK_NODE_BIN) when set, else from
// .ci/openclaw.sh, which installs or reuses the pinned gateway. A missing
// gateway fails the test: this build tag promises the real one.
func locateGateway(t *testing.T) (node, pkg string) {
	t.Helper()
	bin, node := os.Getenv("CADDYHOOK_OPENCLAW_BIN"), os.Getenv("CADDYHOOK_NODE_BIN")
	if bin == "" {
		out, err := exec.Command("bash", filepath.Join("..", "..", ".ci", "openclaw.sh")).Output()
		if err != nil {
			t.Fatalf(".ci/openclaw.sh: %v", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "CADDYHOOK_OPENCLAW_BIN="); ok {
				bin = v
			}
			if v, ok := strings.CutPrefix(sc.Text(), "CADDYHOOK_NODE_BIN="); ok {
				node = v
			}
		}
	}
	if node == "" {
		var err error
		if node, err = exec.LookPath("node"); err != nil {
			t.Fatal("no Node binary for the gateway")
		}
	}
	if bin == "" {
		t.Fatal("the gateway installation was not found")
	}
	return node, filepath.Dir(bin)
}

// gatewayDetectorModule returns the gateway's dist module that defines
// SUSPICIOUS_PATTERNS, and its text.
func gatewayDetectorModule(t *testing.T, pkg string) (string, string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(pkg, "dist", "external-content-*.mjs"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte("const SUSPICIOUS_PATTERNS = [")) {
			return f, string(b)
		}
	}
	t.Fatalf("no dist/external-content-*.mjs with SUSPICIOUS_PATTERNS under %s", pkg)
	return "", ""
}

// TestGatewayDetectorCopy: gatewaySuspiciousPatterns is exactly the list
// in the installed gateway.
func TestGatewayDetectorCopy(t *testing.T) {
	_, pkg := locateGateway(t)
	_, src := gatewayDetectorModule(t, pkg)
	block := regexp.MustCompile(`(?s)const SUSPICIOUS_PATTERNS = \[\n(.*?)\n\];`).FindStringSubmatch(src)
	if block == nil {
		t.Fatal("SUSPICIOUS_PATTERNS not found")
	}
	var got []string
	for _, line := range strings.Split(block[1], "\n") {
		got = append(got, strings.TrimSuffix(strings.TrimSpace(line), ","))
	}
	if strings.Join(got, "\n") != strings.Join(gatewaySuspiciousPatterns, "\n") {
		t.Fatalf("the gateway's patterns changed:\n%s\nour copy (%s):\n%s", strings.Join(got, "\n"),
			gatewayPatternsSource, strings.Join(gatewaySuspiciousPatterns, "\n"))
	}
}

// TestGatewayDetectorOnWrapper runs the gateway's own detectSuspiciousPatterns
// (in Node) on the edge's wrapper around every fixture payload and every
// forgery variant: it flags no fixture, flags a variant only for what its
// neutralised content says, and agrees with the Go translation used by the
// unit tests.
func TestGatewayDetectorOnWrapper(t *testing.T) {
	node, pkg := locateGateway(t)
	module, _ := gatewayDetectorModule(t, pkg)
	var inputs []string
	for _, strs := range fixtureStrings(t) {
		inputs = append(inputs, Wrap(strings.Join(strs, "\n"), SourceWebhook))
	}
	fixtures := len(inputs)
	for _, v := range slices.Concat(forgeryVariants, separatedVariants) {
		inputs = append(inputs, Wrap(v.in, SourceWebhook))
	}
	in, _ := json.Marshal(inputs)
	script := `
const m = await import(process.argv[1]);
const detect = Object.values(m).find(f => typeof f === "function" && f.name === "detectSuspiciousPatterns");
if (!detect) throw new Error("detectSuspiciousPatterns is not exported");
let input = "";
for await (const chunk of process.stdin) input += chunk;
process.stdout.write(JSON.stringify(JSON.parse(input).map(s => detect(s))));
`
	cmd := exec.Command(node, "--input-type=module", "-e", script, module)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var hits [][]string
	if err := json.Unmarshal(out, &hits); err != nil || len(hits) != len(inputs) {
		t.Fatalf("node answered %q (%v)", out, err)
	}
	detect := gatewayDetector(t)
	for i, h := range hits {
		if i < fixtures && len(h) > 0 {
			t.Errorf("the gateway flags the wrapped fixture %d: %v", i, h)
		}
		var goHits []string
		for _, lit := range detect(inputs[i]) {
			goHits = append(goHits, lit[1:strings.LastIndexByte(lit, '/')])
		}
		if strings.Join(goHits, "|") != strings.Join(h, "|") {
			t.Errorf("input %d: the gateway finds %v, the Go copy %v", i, h, goHits)
		}
	}
}
