package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// benchEnv is one run's working directory, secrets and addresses.
type benchEnv struct {
	dir        string
	sink       string // the sink's Unix socket
	admin      string // Caddy's admin Unix socket ("" = admin off)
	token      string
	gwToken    string
	clusterKey string             // the cluster rows' signing key
	ports      map[string]int     // row id → loopback port (of a socket hookbench holds)
	fds        map[string]int     // row id → the descriptor Caddy gets that socket as
	accessLog  bool               // every site gets an access log
	forwarded  bool               // row (e) varies X-Forwarded-For from a trusted proxy
	natsURLs   map[natsKey]string // NATS servers of the cluster rows → their client URLs ({nats<n>}, {nats<n>always})
	signers    *signers           // the signed rows' provider keys
}

// expand fills the placeholders of a site body.
func (e *benchEnv) expand(s string) string {
	var keys []string
	if e.signers != nil {
		keys = e.signers.placeholders()
	}
	return strings.NewReplacer(append([]string{
		"{sink}", e.sink,
		"{dir}", e.dir,
		"{token}", e.token,
		"{gateway_token}", e.gwToken,
		"{cluster_key}", e.clusterKey,
		"{nats1}", e.natsURLs[natsKey{1, false}],
		"{nats3}", e.natsURLs[natsKey{3, false}],
		"{nats3always}", e.natsURLs[natsKey{3, true}],
	}, keys...)...).Replace(s)
}

// caddyfile returns a Caddyfile with one site per row, each on its own
// loopback socket (handed to Caddy: `bind fd/N`), all with the same server
// settings.
func (e *benchEnv) caddyfile(rows []rowDef) string {
	var b strings.Builder
	b.WriteString("{\n")
	if e.admin != "" {
		fmt.Fprintf(&b, "\tadmin unix/%s\n", e.admin)
	} else {
		b.WriteString("\tadmin off\n")
	}
	b.WriteString("\tauto_https off\n\tpersist_config off\n")
	if _, ok := findRow(rows, "e"); ok && e.forwarded {
		fmt.Fprintf(&b, "\tservers fd/%d {\n\t\ttrusted_proxies static 127.0.0.0/8\n\t\ttrusted_proxies_strict\n\t}\n", e.fds["e"])
	}
	b.WriteString("}\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "\n# (%s) %s\nhttp://:%d {\n\tbind fd/%d\n", r.id, r.title, e.ports[r.id], e.fds[r.id])
		if e.accessLog {
			b.WriteString("\tlog {\n\t\toutput discard\n\t}\n")
		}
		fmt.Fprintf(&b, "\t%s\n}\n", e.expand(r.site))
	}
	return b.String()
}

// writeFiles writes the files the sites refer to (the transform module).
func (e *benchEnv) writeFiles() error {
	dir := filepath.Join(e.dir, "hooks", "transforms")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bench.ts"), []byte(transformModule), 0o600)
}

// probe validates row r's site alone with the built binary (Caddy
// provisions it, so templates, CEL and transforms compile). It returns ""
// when the site is accepted, else why the row is skipped.
func (e *benchEnv) probe(bin string, r rowDef) string {
	pe := *e
	pe.admin = ""
	path := filepath.Join(e.dir, "probe-"+r.id+".caddyfile")
	if err := os.WriteFile(path, []byte(pe.caddyfile([]rowDef{r})), 0o600); err != nil {
		return "probe failed: " + err.Error()
	}
	out, err := exec.Command(bin, "adapt", "--config", path, "--adapter", "caddyfile", "--validate").CombinedOutput()
	if err == nil {
		return ""
	}
	msg := caddyError(out)
	if strings.Contains(msg, "unrecognized") {
		return "not supported by this build"
	}
	return "config refused: " + msg
}

// caddyError extracts the error message from Caddy's JSON log output, or
// returns the last line.
func caddyError(out []byte) string {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	for _, l := range lines {
		var entry struct{ Level, Msg string }
		if json.Unmarshal(l, &entry) == nil && entry.Level == "error" {
			return entry.Msg
		}
	}
	if len(lines) == 0 {
		return "(no output)"
	}
	return string(lines[len(lines)-1])
}

// hostFor returns the Host header (and dial address) of row id.
func (e *benchEnv) hostFor(id string) string {
	return "127.0.0.1:" + strconv.Itoa(e.ports[id])
}
