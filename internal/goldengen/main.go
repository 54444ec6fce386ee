// Command goldengen writes the golden fixtures of the stored and wire
// formats with a caddy binary of an earlier build: the formats that build
// writes, as it writes them. It runs the binary (any build of this
// repository: it only drives it from outside, over HTTP and NATS, so it
// works against old trees unchanged) next to an in-process NATS server
// and a stand-in gateway, sends a fixed set of requests, and keeps:
//
//	spool.db    the local spool of a node: a dead letter and two queued
//	            events (a rendered agent run with trace context, a
//	            forwarded request with its headers)
//	events.db   that node's event log (-events: builds that have one)
//	nats.json   every record the cluster's nodes wrote to NATS, as
//	            written: queued events, dead letters, idempotency claims and
//	            replies, locks, failure batches and their confirmations,
//	            announcements, the wake lane's lease, outcomes
//	manifest.json  what was sent (bodies, headers, keys, the event ids the
//	            node answered), the signing key, the times: what the
//	            golden tests check every field against
//
// The fixtures under caddyhook/spool/testdata/golden,
// internal/eventlog/testdata/golden and caddyhook/cluster/testdata/golden
// were made with (README, Versions and upgrades):
//
//	git worktree add /tmp/old43 43fd7c0 && (cd /tmp/old43 && go build -o /tmp/caddy-43fd7c0 ./cmd/caddy)
//	go run ./internal/goldengen -caddy /tmp/caddy-43fd7c0 -out /tmp/golden/43fd7c0
//	git worktree add /tmp/old45 453004b && (cd /tmp/old45 && go build -o /tmp/caddy-453004b ./cmd/caddy)
//	go run ./internal/goldengen -caddy /tmp/caddy-453004b -out /tmp/golden/453004b -sealed -events
//
// then copying the files (see the golden tests for which go where).
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/caddyhook/caddyhook/internal/golden"
	"github.com/caddyhook/caddyhook/internal/natsrun"
)

// Fixed inputs (the golden tests know them).
const (
	hookToken    = "golden-hook-token-5b9d8c7e6f5a4b3c2d1e0f9a8b7c6d5e"
	gatewayToken = "golden-gateway-token-0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c"
	// SigningKey seals the sealed fixtures: not a secret of anyone's.
	SigningKey  = "golden-fixture-signing-key-9f8e7d6c5b4a39281706f5e4"
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceState  = "golden=t61rcWkgMzE"
	idemKey     = "golden-idempotency-key-1"
)

// The fixture's types (internal/golden).
type (
	Request  = golden.Request
	Record   = golden.Record
	Manifest = golden.Manifest
)

func main() {
	bin := flag.String("caddy", "", "the caddy binary of the build whose formats to write")
	out := flag.String("out", "", "the directory to write the fixtures into")
	build := flag.String("build", "", "the build's name for the manifest (its commit)")
	sealed := flag.Bool("sealed", false, "the build has signing_key (seals its NATS records)")
	events := flag.Bool("events", false, "the build has the event log (events { dir … })")
	flag.Parse()
	if *bin == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*bin, *out, *build, *sealed, *events); err != nil {
		log.Fatal(err)
	}
}

// gatewayReply is the 400 the stand-in gateway answers a body marked dead.
const gatewayReply = `{"ok":false,"error":"refused for the golden fixture"}`

// gateway is the stand-in gateway: 400 for a body marked please-dead,
// 503 for one marked please-retry, else 200 with a run id.
func gateway(sock string) (*http.Server, *int64, error) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	n := new(int64)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		*n++
		k := *n
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Header.Get("Authorization") != "Bearer "+gatewayToken:
			w.WriteHeader(http.StatusUnauthorized)
		case bytes.Contains(body, []byte("please-dead")):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, gatewayReply)
		case bytes.Contains(body, []byte("please-retry")):
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"ok":false,"error":"busy"}`)
		default:
			fmt.Fprintf(w, `{"ok":true,"runId":"golden-run-%d"}`, k)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	return srv, n, nil
}

// node is one caddy process.
type node struct {
	name, dir, base, admin string
	cmd                    *exec.Cmd
	ln                     net.Listener
}

// startNode writes a Caddyfile whose hooks block has extra and runs it.
func startNode(bin, dir, name, extra string) (*node, error) {
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	n := &node{name: name, dir: d, base: "http://" + ln.Addr().String(), admin: filepath.Join(d, "admin.sock"), ln: ln}
	cf := fmt.Sprintf(`{
	admin unix/%s
	auto_https off
	persist_config off
}
http://%s {
	bind fd/3
	hooks {
		token %s
		gateway_token %s
		%s
	}
	respond "ready" 200
}
`, n.admin, ln.Addr(), hookToken, gatewayToken, extra)
	if err := os.WriteFile(filepath.Join(d, "Caddyfile"), []byte(cf), 0o600); err != nil {
		return nil, err
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(d, "caddy.log"))
	if err != nil {
		return nil, err
	}
	n.cmd = exec.Command(bin, "run", "--config", filepath.Join(d, "Caddyfile"), "--adapter", "caddyfile")
	n.cmd.Env = append(os.Environ(), "HOME="+d, "XDG_CONFIG_HOME="+filepath.Join(d, "config"), "XDG_DATA_HOME="+filepath.Join(d, "data"))
	n.cmd.Stdout, n.cmd.Stderr, n.cmd.ExtraFiles = logf, logf, []*os.File{f}
	if err := n.cmd.Start(); err != nil {
		return nil, err
	}
	if err := waitFor(60*time.Second, name+" ready", func() bool {
		resp, err := http.Get(n.base + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		b, _ := os.ReadFile(filepath.Join(d, "caddy.log"))
		return nil, fmt.Errorf("%w\n%s", err, b)
	}
	return n, nil
}

// stop ends the process gracefully.
func (n *node) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
}

// post sends a hook request and fills in its answer.
func (n *node) post(r *Request, token string) error {
	req, err := http.NewRequest(http.MethodPost, n.base+r.Path, strings.NewReader(r.Body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r.Status, r.Reply, r.Node = resp.StatusCode, string(b), n.name
	var rep struct {
		RunID string `json:"runId"`
	}
	if json.Unmarshal(b, &rep) == nil {
		r.EventID = rep.RunID
	}
	return nil
}

// adminGet reads an admin API path of n into v.
func (n *node) adminGet(path string, v any) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", n.admin)
	}}}
	resp, err := c.Get("http://127.0.0.1" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// spoolState is the spool part of GET /hooks/.
func (n *node) spoolState() (depth, dead int) {
	var st []struct {
		Spool struct {
			Depth       int `json:"depth"`
			DeadLetters int `json:"dead_letters"`
		} `json:"spool"`
	}
	if err := n.adminGet("/hooks/", &st); err != nil || len(st) == 0 {
		return -1, -1
	}
	return st[0].Spool.Depth, st[0].Spool.DeadLetters
}

func waitFor(d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func run(bin, out, build string, sealed, events bool) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "golden")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	m := &Manifest{Build: build, Sealed: sealed, Namespace: "hooks", Start: time.Now().UTC(),
		Gateway: map[string]string{"please-dead": gatewayReply, "please-retry": "503"}}
	if sealed {
		m.SigningKey = SigningKey
	}

	gw, gwCount, err := gateway(filepath.Join(work, "gw.sock"))
	if err != nil {
		return err
	}
	defer gw.Close()

	// the local spool: one dead letter, two events queued after a failed attempt
	spoolDir, eventsDir := filepath.Join(work, "spool"), filepath.Join(work, "events")
	local := "gateway unix/" + filepath.Join(work, "gw.sock") + `
		wrap gateway
		spool ` + spoolDir + ` {
			retry_initial 1h
			retry_max 2h
			max_age 720h
		}
		mapping fwd {
			match_path fwd
			forward
		}`
	if events {
		local += `
		events {
			dir ` + eventsDir + `
			bodies on
		}`
	}
	l, err := startNode(bin, work, "spool", local)
	if err != nil {
		return err
	}
	reqs := []Request{
		{Name: "spool-dead-wake", Path: "/hooks/wake", Body: `{"text":"golden wake please-dead","mode":"now"}`},
		{Name: "spool-queued-agent", Path: "/hooks/agent", Body: `{"message":"golden agent please-retry","name":"Golden"}`,
			Header: map[string]string{"Traceparent": traceParent, "Tracestate": traceState}},
		{Name: "spool-queued-forward", Path: "/hooks/fwd?golden=1", Body: `{"golden":"forward please-retry"}`,
			Header: map[string]string{"X-Golden": "forwarded header", "Idempotency-Key": "golden-forward-key"}},
	}
	for i := range reqs {
		if err := l.post(&reqs[i], hookToken); err != nil {
			return err
		}
	}
	if err := waitFor(30*time.Second, "the local spool: 1 dead letter, 2 queued after one attempt", func() bool {
		depth, dead := l.spoolState()
		return depth == 2 && dead == 1 && *gwCount >= 3
	}); err != nil {
		return err
	}
	time.Sleep(time.Second) // the attempts' bookkeeping and the event log's flush (500 ms)
	l.stop()
	m.Requests = append(m.Requests, reqs...)
	if err := copyBolt(filepath.Join(spoolDir, "spool.db"), filepath.Join(out, "spool.db")); err != nil {
		return err
	}
	if events {
		if err := copyBolt(filepath.Join(eventsDir, "events.db"), filepath.Join(out, "events.db")); err != nil {
			return err
		}
	}

	// the cluster: an edge and a delivery node on one NATS server, every
	// record they publish recorded as written
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(work, "nats"),
		NoLog: true, NoSigs: true})
	if err != nil {
		return err
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		return errors.New("nats-server not ready")
	}
	defer ns.Shutdown()
	if err := natsrun.WaitJetStream(ns.ClientURL(), 30*time.Second); err != nil {
		return err
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	var mu sync.Mutex
	var recs []Record
	sub, err := nc.Subscribe(">", func(msg *nats.Msg) {
		if !strings.HasPrefix(msg.Subject, "hooks.") && !strings.HasPrefix(msg.Subject, "$KV.hooks_") {
			return // the JetStream API, acknowledgements, inboxes
		}
		r := Record{Subject: msg.Subject, Data: append([]byte(nil), msg.Data...)}
		if len(msg.Header) > 0 {
			r.Header = msg.Header
		}
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	_ = nc.Flush()
	cl := `cluster nats ` + ns.ClientURL() + ` {
			timeout 2s
			ack_wait 5s`
	if sealed {
		cl += `
			signing_key ` + SigningKey
	}
	cl += `
		}
		auth_failures 3 1m
		wrap gateway
		mapping fwd {
			match_path fwd
			forward
		}`
	edge, err := startNode(bin, work, "edge", cl+`
		spool cluster {
			deliver off
			fallback reject
		}`)
	if err != nil {
		return err
	}
	deliv, err := startNode(bin, work, "delivery", "gateway unix/"+filepath.Join(work, "gw.sock")+"\n\t\t"+cl+`
		spool cluster {
			fallback reject
			retry_initial 1h
			retry_max 2h
		}`)
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the announcements go round
	creqs := []Request{
		{Name: "cluster-dead-wake", Path: "/hooks/wake", Body: `{"text":"golden cluster wake please-dead","mode":"now"}`},
		{Name: "cluster-delivered-agent", Path: "/hooks/agent", Body: `{"message":"golden cluster agent","name":"Golden"}`,
			Header: map[string]string{"Traceparent": traceParent, "Tracestate": traceState}},
		{Name: "cluster-retried-forward", Path: "/hooks/fwd?golden=2", Body: `{"golden":"cluster forward please-retry"}`,
			Header: map[string]string{"X-Golden": "forwarded header"}},
		{Name: "cluster-keyed-agent", Path: "/hooks/agent", Body: `{"message":"golden keyed agent","name":"Golden"}`,
			Header: map[string]string{"Idempotency-Key": idemKey}},
		{Name: "cluster-keyed-agent-again", Path: "/hooks/agent", Body: `{"message":"golden keyed agent","name":"Golden"}`,
			Header: map[string]string{"Idempotency-Key": idemKey}},
	}
	for i := range creqs {
		if err := edge.post(&creqs[i], hookToken); err != nil {
			return err
		}
	}
	if err := waitFor(30*time.Second, "the cluster: 1 dead letter, 1 queued (retrying)", func() bool {
		depth, dead := deliv.spoolState()
		return dead == 1 && depth == 1
	}); err != nil {
		return err
	}
	// failures of one address on both nodes until it is locked: failure
	// batches to its owner, their confirmations, the lock record
	for i := range 8 {
		n := []*node{edge, deliv}[i%2]
		r := Request{Name: fmt.Sprintf("cluster-wrong-token-%d", i), Path: "/hooks/wake", Body: `{"text":"x"}`}
		if err := n.post(&r, "wrong-token-of-the-golden-fixture-0123456789"); err != nil {
			return err
		}
		creqs = append(creqs, r)
	}
	time.Sleep(3 * time.Second) // announcements, the lease's renewals, the outcomes
	edge.stop()
	deliv.stop() // releases the wake lane's lease
	time.Sleep(500 * time.Millisecond)
	_ = sub.Unsubscribe()
	m.Requests = append(m.Requests, creqs...)
	m.End = time.Now().UTC()
	mu.Lock()
	defer mu.Unlock()
	if err := golden.Write(filepath.Join(out, golden.NATSFile), recs); err != nil {
		return err
	}
	if err := golden.Write(filepath.Join(out, golden.ManifestFile), m); err != nil {
		return err
	}
	log.Printf("wrote %s: %d NATS records, %d requests", out, len(recs), len(m.Requests))
	return nil
}

// copyBolt copies a bbolt file as it was written, up to the high-water
// mark of its newest meta page: bbolt grows a file ahead of its use (a
// spool.db by 16 MiB), and the tail past the mark holds nothing (bbolt
// grows the file again when it opens it).
func copyBolt(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if n := boltUsed(b); n > 0 && n < len(b) {
		b = b[:n]
	}
	return os.WriteFile(to, b, 0o644)
}

// boltUsed is the bytes below the high-water mark of the newer of b's two
// meta pages (0 when b is not a bbolt file).
func boltUsed(b []byte) int {
	le := binary.LittleEndian
	const hdr = 16 // page header; the meta follows: magic, version, page size, flags, root, freelist, pgid, txid
	if len(b) < hdr+64 || le.Uint32(b[hdr:]) != 0xED0CDAED {
		return 0
	}
	pageSize := int(le.Uint32(b[hdr+8:]))
	best, txid := 0, uint64(0)
	for _, off := range []int{0, pageSize} {
		m := b[off+hdr:]
		if len(b) < off+hdr+64 || le.Uint32(m) != 0xED0CDAED {
			continue
		}
		if t := le.Uint64(m[48:]); t >= txid {
			best, txid = int(le.Uint64(m[40:]))*pageSize, t
		}
	}
	return best
}
