package caddyhook

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/nats-io/nkeys"

	"github.com/caddyhook/caddyhook/internal/adminapi"
	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/optdoc"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// What you configure is what runs (issue 25): every option of the hooks
// directive is changed in a reload, and the reload must apply it. A row of
// reloadRows names an option (block.option, as the Caddyfile writes it),
// the lines of the hooks block before and after, and an observation of
// the running server (a request and what the sender or the gateway got,
// the admin API, metrics). Each row runs in a server of its own:
//
//  1. load the config with the "before" lines and observe;
//  2. reload to the "after" lines (the reload must succeed, or, for a row
//     with refused set, fail naming the option) and observe;
//  3. stop Caddy, start it afresh with the "after" lines and observe.
//
// The observation after the reload must equal the one after the fresh
// start (a reload is a restart as far as the config goes), and differ
// from the one before (the row tells the settings apart). State kept
// across reloads (lockout table, idempotency cache, spool, cluster
// connection) is where a reload used to keep the old value; observations
// use fresh client addresses and keys, so that they do not depend on one
// another.
//
// TestReloadTableCoversEveryOption keeps the table complete: every option
// of the documentation (the generated docs/reference.md and the
// caddyfile examples of README.md and docs/) and every subdirective the
// Caddyfile parser reads needs a row. Adding an option is adding a row.

// reloadRow is one option's reload case.
type reloadRow struct {
	option        string // block.option: hooks, spool, mapping, transform, verify, cluster, events, …
	before, after string // lines of the hooks block (markers: see reloadEnv.expand)
	site          bool   // before and after are lines of the site block instead
	observe       func(e *reloadEnv) string
	refused       string // the reload must fail with this in the error (the option cannot change)
}

// forwardAuthConsole is the console at /ops/ behind forward_auth (the
// service of forwardAuthService), with opts after hooks_console.
func forwardAuthConsole(opts string) string {
	return "handle_path /ops/* {\n\t\tforward_auth @AUTH@ {\n\t\t\turi /auth\n\t\t\tcopy_headers Remote-User\n\t\t}\n\t\thooks_console" + opts + "\n\t}"
}

// Test secrets and values of the table.
const (
	rtAltHookToken    = "rt-alt-hook-token-8d7c6b5a49382716f5e4d3c2b1a0"
	rtAltGatewayToken = "rt-alt-gateway-token-1a2b3c4d5e6f708192a3b4c5d6"
	rtSecretA         = "rt-signing-secret-a-0123456789"
	rtSecretB         = "rt-signing-secret-b-9876543210"
	rtUnreachableNATS = "nats://127.0.0.1:1" // refused at once: the engine runs on local state
)

// reloadEnv is the server of one row: Caddy in this process with its
// admin endpoint on a socket, gateways, transforms and files the rows
// refer to.
type reloadEnv struct {
	*ingress
	admin      *testAdmin
	gwB, slow  *testGateway
	transforms string
	nats       *natstest.Server
	auth       string // a forward_auth service (forwardAuthService), once a row names @AUTH@
	n          int
}

// newReloadEnv prepares the gateways and files; nothing is loaded yet.
func newReloadEnv(t *testing.T) *reloadEnv {
	t.Helper()
	dir, err := os.MkdirTemp("", "rlt") // short: socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	gwA := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	e := &reloadEnv{
		ingress:    &ingress{t: t, dir: dir, sock: gwA.sock, gw: gwA.Gateway, logPath: filepath.Join(dir, "caddy.log")},
		gwB:        serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true}),
		slow:       serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true, Delay: time.Second}),
		transforms: filepath.Join(dir, "transforms"),
	}
	e.client, e.reloaded = newIngressClient(30 * time.Second)
	sock := filepath.Join(dir, "admin.sock")
	e.admin = &testAdmin{t: t, sock: sock, in: e.ingress, c: &http.Client{Timeout: 30 * time.Second, Transport: adminTransport(sock)}}
	t.Cleanup(func() {
		_ = caddy.Load([]byte(`{"admin":{"disabled":true,"config":{"persist":false}}}`), true)
		_ = caddy.Stop()
	})
	files := map[string]string{
		"transforms/a/t.js":   `export default function () { return { message: "from a" } }`,
		"transforms/b/t.js":   `export default function () { return { message: "from b" } }`,
		"transforms/t.js":     `export default function () { return { message: "from t" } }`,
		"transforms/t2.js":    `export default function () { return { message: "from t2" } }`,
		"transforms/multi.js": `export function a() { return { message: "export a" } }` + "\n" + `export function b() { return { message: "export b" } }`,
		"transforms/slow.js":  `export default function () { const end = Date.now() + 500; while (Date.now() < end) {} return { message: "slow" } }`,
		"transforms/big.js":   `export default function () { const s = "x".repeat(3 << 20); return { message: "built " + s.length } }`,
		"a.creds":             "not read: the server is never reached",
		"b.creds":             "not read: the server is never reached",
		"jwks-a.json":         string(jwksOf(t, &pvGoogleKey().PublicKey)),
		"jwks-b.json":         string(jwksOf(t, &rtGoogleKeyB().PublicKey)),
		"asana-a":             rtSecretA,
		"asana-b":             rtSecretB,
	}
	for _, name := range []string{"nkA.seed", "nkB.seed"} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, err := kp.Seed()
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(seed)
	}
	files["tls.pem"], files["tls.key"] = selfSignedPEM(t)
	files["tls-copy.pem"], files["tls-copy.key"] = files["tls.pem"], files["tls.key"]
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"CADDYHOOK_RT_A", "CADDYHOOK_RT_B", "CADDYHOOK_RT_KEY"} {
		t.Setenv(v, "rt-nats-secret-0123456789abcdef-"+v)
	}
	return e
}

// selfSignedPEM returns a self-signed certificate and its key, PEM.
func selfSignedPEM(t *testing.T) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "caddyhook test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

// expand replaces the markers of a row's lines: @GWA@, @GWB@ and @SLOW@
// (gateway sockets), @DIR@ (the env's directory), @TR@ (the transforms
// root), @NATS@ (a NATS URL nothing answers) and @NATSUP@ (a NATS server
// with JetStream, started for the env when a row asks for it).
func (e *reloadEnv) expand(s string) string {
	if strings.Contains(s, "@NATSUP@") && e.nats == nil {
		e.nats = natstest.Run(e.t, natstest.Options{})
	}
	natsUp := ""
	if e.nats != nil {
		natsUp = e.nats.URL()
	}
	if strings.Contains(s, "@AUTH@") && e.auth == "" {
		e.auth = forwardAuthService(e.t)
	}
	return strings.NewReplacer("@GWA@", e.sock, "@GWB@", e.gwB.sock, "@SLOW@", e.slow.sock, "@DIR@", e.dir,
		"@TR@", e.transforms, "@NATS@", rtUnreachableNATS, "@NATSUP@", natsUp, "@AUTH@", e.auth).Replace(s)
}

// reloadBaseLines are the hooks lines every row starts from; a row's line
// with the same first word replaces one.
var reloadBaseLines = []string{
	"token " + itHookToken,
	"gateway unix/@GWA@",
	"gateway_token " + itGatewayToken,
	"transforms_root @TR@",
	testTransformTimeout,
}

// caddyfile is the whole config with extra in the hooks block: the admin
// endpoint on the env's socket, and 127.0.0.1 a trusted proxy (strict), so
// that a test request names its client address in X-Forwarded-For.
func (e *reloadEnv) caddyfile(extra string) string {
	extra = e.expand(extra)
	top := map[string]bool{}
	depth := 0
	for _, line := range strings.Split(extra, "\n") {
		line = strings.TrimSpace(line)
		if f := strings.Fields(line); len(f) > 0 && depth == 0 {
			top[f[0]] = true
		}
		depth += strings.Count(line, "{") - strings.Count(line, "}")
	}
	var lines []string
	for _, l := range reloadBaseLines {
		if !top[strings.Fields(l)[0]] {
			lines = append(lines, e.expand(l))
		}
	}
	lines = append(lines, extra)
	return fmt.Sprintf(`{
	admin unix/%s
	auto_https off
	persist_config off
	log {
		output file %s
		format json
		level DEBUG
	}
	servers {
		trusted_proxies static 127.0.0.1/32
		trusted_proxies_strict
	}
}
%s {
	bind 127.0.0.1
	hooks {
		%s
	}
	respond "next handler" 200
}
`, e.admin.sock, e.logPath, testSiteAddress, strings.Join(lines, "\n\t\t"))
}

// load runs the config with extra in the hooks block (site: in the site
// block, the hooks block being the base one).
func (e *reloadEnv) load(extra string, site bool) error {
	if !site {
		return e.tryLoad(e.caddyfile(extra))
	}
	return e.tryLoad(strings.Replace(e.caddyfile(""), "\thooks {", e.expand(extra)+"\n\thooks {", 1))
}

// addr is a client address no other observation of the env used.
func (e *reloadEnv) addr() string {
	e.n++
	return fmt.Sprintf("198.51.%d.%d", 100+e.n/250, e.n%250+1)
}

// key is an idempotency key or delivery id no other observation used.
func (e *reloadEnv) key() string {
	e.n++
	return fmt.Sprintf("rt-key-%d-%d", e.n, time.Now().UnixNano())
}

// send posts body to path from a fresh client address, with the hook
// token unless noToken; hdr are "Name: value" pairs.
func (e *reloadEnv) send(path, body string, noToken bool, hdr ...string) result {
	e.t.Helper()
	hdr = append([]string{"X-Forwarded-For: " + e.addr()}, hdr...)
	if noToken {
		return e.do(http.MethodPost, path, body, hdr...)
	}
	return e.post(path, body, hdr...)
}

// sent is what the gateway gw received for one request: "status N" when
// the request was refused, else what got summarises.
func (e *reloadEnv) sent(gw *devgw.Gateway, r func() result, got func(devgw.Received) string) string {
	e.t.Helper()
	n := len(gw.Received())
	res := r()
	if res.status != http.StatusOK {
		return fmt.Sprintf("status %d %s", res.status, res.body)
	}
	var recs []devgw.Received
	testkit.WaitForState(e.t, func() string { return "the gateway never received the request" }, func() bool {
		recs = gw.Received()
		return len(recs) > n
	})
	return got(recs[len(recs)-1])
}

// status of a request: the status and the error text, if any.
func status(r result) string {
	if r.status == http.StatusOK {
		return "200"
	}
	return fmt.Sprintf("%d %s", r.status, r.body)
}

// agentField is an observation: a mapped agent request to /hooks/m, and
// the field of the body the gateway received.
func agentField(field string) func(e *reloadEnv) string {
	return func(e *reloadEnv) string {
		return e.sent(e.gw, func() result { return e.send("/hooks/m", `{}`, false) },
			func(r devgw.Received) string { return fmt.Sprintf("%s %v", r.Kind, r.Body[field]) })
	}
}

// messageHas is an observation: a request to path, and whether the
// message the gateway received holds each of texts.
func messageHas(path, body string, texts ...string) func(e *reloadEnv) string {
	return func(e *reloadEnv) string {
		return e.sent(e.gw, func() result { return e.send(path, body, false) }, func(r devgw.Received) string {
			msg, _ := r.Body["message"].(string)
			var out []string
			for _, text := range texts {
				out = append(out, fmt.Sprintf("%s:%t", text, strings.Contains(msg, text)))
			}
			return strings.Join(out, " ")
		})
	}
}

// statusOf is an observation: the status of a request to path.
func statusOf(path, body string, hdr ...string) func(e *reloadEnv) string {
	return func(e *reloadEnv) string { return status(e.send(path, body, false, hdr...)) }
}

// dispatches is an observation: how many dispatches two copies of a
// request made, each copy with the headers hdr(key) for one fresh key.
func dispatches(path, body string, noToken bool, hdr func(key string) []string) func(e *reloadEnv) string {
	return func(e *reloadEnv) string {
		k := e.key()
		n := len(e.gw.Received())
		for range 2 {
			if r := e.send(path, body, noToken, hdr(k)...); r.status != http.StatusOK {
				return status(r)
			}
		}
		return strconv.Itoa(len(e.gw.Received()) - n)
	}
}

// adminStatus is an observation of GET /hooks/.
func adminStatus(f func(adminapi.HandlerStatus) any) func(e *reloadEnv) string {
	return func(e *reloadEnv) string { return fmt.Sprint(f(e.admin.status(""))) }
}

// spoolSetting is an observation of the spool in GET /hooks/.
func spoolSetting(f func(*adminapi.Spool) any) func(e *reloadEnv) string {
	return adminStatus(func(st adminapi.HandlerStatus) any {
		if st.Spool == nil {
			return "no spool"
		}
		return f(st.Spool)
	})
}

// clusterSetting is an observation of the cluster engine's connection
// settings in GET /hooks/.
func clusterSetting(name string) func(e *reloadEnv) string {
	return adminStatus(func(st adminapi.HandlerStatus) any {
		if st.Cluster == nil {
			return "no cluster"
		}
		return st.Cluster.Settings[name]
	})
}

// failuresUntilLocked is an observation: wrong-token requests from one
// fresh address until it is locked out (at most 10), or the IPv6 prefix
// it is listed under when v6 is set.
func failuresUntilLocked(e *reloadEnv) string {
	addr := e.addr()
	for i := 1; i <= 10; i++ {
		r := e.do(http.MethodPost, "/hooks/wake", `{"text":"x"}`, "X-Forwarded-For: "+addr, "Authorization: Bearer "+rtAltHookToken)
		if r.status == http.StatusTooManyRequests {
			return fmt.Sprintf("locked after %d", i-1)
		}
	}
	return "not locked after 10"
}

// slowBody is an observation: a wake request with the token whose body
// arrives in two halves, 500 ms apart (a slow client), and its status.
func slowBody(e *reloadEnv) string {
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	body := `{"text":"a slow client"}`
	fmt.Fprintf(conn, "POST /hooks/wake HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nX-Forwarded-For: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", itHookToken, e.addr(), len(body), body[:10])
	time.Sleep(500 * time.Millisecond) // the client's pace, not a synchronisation
	_, _ = conn.Write([]byte(body[10:]))
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "no answer: " + err.Error()
	}
	return strings.TrimSpace(line)
}

// signedHMAC signs a request for the hmac verifier: header carries
// prefix + the digest (alg, encoding) of layout with {body} and
// {timestamp} filled in.
func signedHMAC(secret, alg, encoding, layout, ts, body string) string {
	newHash := map[string]func() hash.Hash{"sha256": sha256.New, "sha512": sha512.New}[alg]
	m := hmac.New(newHash, []byte(secret))
	m.Write([]byte(strings.NewReplacer("{body}", body, "{timestamp}", ts).Replace(layout)))
	if encoding == "base64" {
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// signedPost is an observation: a request to /hooks/v without the token,
// signed for the hmac verifier.
func signedPost(header, prefix, alg, encoding, layout string, age time.Duration, extra ...string) func(e *reloadEnv) string {
	return func(e *reloadEnv) string {
		body := `{"event":"ping"}`
		ts := strconv.FormatInt(time.Now().Add(-age).Unix(), 10)
		hdr := append([]string{header + ": " + prefix + signedHMAC(rtSecretA, alg, encoding, layout, ts, body), "X-Ts: " + ts}, extra...)
		return status(e.send("/hooks/v", body, true, hdr...))
	}
}

// githubSigned is an observation: a request to /hooks/m signed as GitHub
// signs it, with secret, and without the token.
func githubSignedPost(secret string) func(e *reloadEnv) string {
	return func(e *reloadEnv) string {
		body := `{"zen":"ping"}`
		return status(e.send("/hooks/m", body, true, "X-Hub-Signature-256: sha256="+signedHMAC(secret, "sha256", "hex", "{body}", "", body)))
	}
}

// mappingM is a mapping answering /hooks/m with lines.
func mappingM(lines ...string) string {
	return "mapping m {\n\tmatch_path m\n\t" + strings.Join(lines, "\n\t") + "\n}"
}

// verifyV is a mapping answering /hooks/v, signed with hmac and lines.
func verifyV(lines ...string) string {
	return "mapping v {\n\tmatch_path v\n\tmessage_template x\n\tverify hmac {\n\t\t" + strings.Join(lines, "\n\t\t") + "\n\t}\n}"
}

// natsBlock is a cluster engine block on a server nothing answers (the
// engine then runs on local state and provisions in the background),
// with a signing key unless lines set one.
func natsBlock(lines ...string) string {
	return natsBlockAt("@NATS@", lines...)
}

// natsBlockAt is natsBlock on url.
func natsBlockAt(url string, lines ...string) string {
	base := "url " + url + "\n\ttimeout 100ms\n\t"
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "signing_key") }) {
		base += "signing_key {env.CADDYHOOK_RT_KEY}\n\t"
	}
	return "cluster nats {\n\t" + base + strings.Join(lines, "\n\t") + "\n}"
}

// eventsSetting is an observation of the event log's settings in GET /hooks/.
func eventsSetting(f func(*adminapi.Events) any) func(e *reloadEnv) string {
	return adminStatus(func(st adminapi.HandlerStatus) any {
		if st.Events == nil {
			return "events off"
		}
		return f(st.Events)
	})
}

// eventsBlock is an events block with lines.
func eventsBlock(lines ...string) string {
	return "events {\n\t" + strings.Join(lines, "\n\t") + "\n}"
}

// spoolBlock is a local spool with lines.
func spoolBlock(lines ...string) string {
	return "spool @DIR@/spool {\n\t" + strings.Join(lines, "\n\t") + "\n}"
}

// reloadRows is the table: one row per option.
var reloadRows = []reloadRow{
	// the hooks block
	{option: "hooks.path", before: "path /hooks", after: "path /in",
		observe: func(e *reloadEnv) string { return e.send("/in/wake", `{"text":"t"}`, false).body }},
	{option: "hooks.token", before: "token " + itHookToken, after: "token " + rtAltHookToken,
		observe: statusOf("/hooks/wake", `{"text":"t"}`)},
	{option: "hooks.token_headers", before: "", after: "token_headers x-edge-token",
		observe: func(e *reloadEnv) string {
			return status(e.send("/hooks/wake", `{"text":"t"}`, true, "x-edge-token: "+itHookToken))
		}},
	{option: "hooks.gateway", before: "gateway unix/@GWA@", after: "gateway unix/@GWB@",
		observe: func(e *reloadEnv) string {
			a, b := e.gw.Count(""), e.gwB.Count("")
			e.send("/hooks/wake", `{"text":"t"}`, false)
			return fmt.Sprintf("A+%d B+%d", e.gw.Count("")-a, e.gwB.Count("")-b)
		}},
	{option: "hooks.gateway_token", before: "gateway_token " + itGatewayToken, after: "gateway_token " + rtAltGatewayToken,
		observe: statusOf("/hooks/wake", `{"text":"t"}`)},
	{option: "hooks.gateway_prefix", before: "gateway_prefix /hooks", after: "gateway_prefix /elsewhere",
		observe: statusOf("/hooks/wake", `{"text":"t"}`)},
	{option: "hooks.gateway_timeout", before: "gateway unix/@SLOW@\ngateway_timeout 30s", after: "gateway unix/@SLOW@\ngateway_timeout 50ms",
		observe: statusOf("/hooks/wake", `{"text":"t"}`)},
	{option: "hooks.gateway_wait_timeout", before: "gateway unix/@SLOW@\ngateway_timeout 50ms\ngateway_wait_timeout 10m",
		after:   "gateway unix/@SLOW@\ngateway_timeout 50ms\ngateway_wait_timeout 60ms",
		observe: statusOf("/hooks/agent", `{"message":"m","waitForCompletion":true}`)},
	{option: "hooks.gateway_forward_client_ip", before: "", after: "gateway_forward_client_ip",
		observe: func(e *reloadEnv) string {
			addr := "203.0.113.9"
			return e.sent(e.gw, func() result { return e.post("/hooks/wake", `{"text":"t"}`, "X-Forwarded-For: "+addr) },
				func(r devgw.Received) string { return "X-Forwarded-For " + r.ForwardedFor })
		}},
	{option: "hooks.mode", before: "mode render", after: "mode forward",
		observe: func(e *reloadEnv) string {
			return e.sent(e.gw, func() result { return e.send("/hooks/agent", `{"message":"m"}`, false) },
				func(r devgw.Received) string { return fmt.Sprintf("as sent: %t", string(r.Raw) == `{"message":"m"}`) })
		}},
	{option: "hooks.wrap", before: "wrap edge", after: "wrap gateway",
		observe: messageHas("/hooks/agent", `{"message":"m"}`, "<<<EXTERNAL_UNTRUSTED_CONTENT")},
	{option: "hooks.idempotency_headers", before: "", after: "idempotency_headers x-my-key",
		observe: dispatches("/hooks/agent", `{"message":"m"}`, false, func(k string) []string { return []string{"x-my-key: " + k} })},
	{option: "hooks.max_body", before: "max_body 256KiB", after: "max_body 100",
		observe: statusOf("/hooks/wake", `{"text":"`+strings.Repeat("t", 200)+`"}`)},
	{option: "hooks.auth_failures", before: "auth_failures 3", after: "auth_failures 5", observe: failuresUntilLocked},
	{option: "hooks.lockout", before: "auth_failures 1\nlockout 1m", after: "auth_failures 1\nlockout 2h",
		observe: func(e *reloadEnv) string {
			addr := e.addr()
			e.do(http.MethodPost, "/hooks/wake", `{}`, "X-Forwarded-For: "+addr, "Authorization: Bearer "+rtAltHookToken)
			r := e.do(http.MethodPost, "/hooks/wake", `{}`, "X-Forwarded-For: "+addr)
			s, _ := strconv.Atoi(r.header.Get("Retry-After"))
			return fmt.Sprintf("%d, locked over an hour: %t", r.status, s > 3600)
		}},
	{option: "hooks.unauthenticated_bodies", before: "unauthenticated_bodies 256 10s", after: "unauthenticated_bodies 8 2s",
		observe: adminStatus(func(st adminapi.HandlerStatus) any {
			return fmt.Sprint(st.Settings.UnauthenticatedBodies, " ", st.Settings.UnauthenticatedTimeoutSecond)
		})},
	{option: "unauthenticated_bodies.per_address", before: "unauthenticated_bodies {\n\tper_address 8\n}",
		after:   "unauthenticated_bodies {\n\tper_address 2\n}",
		observe: adminStatus(func(st adminapi.HandlerStatus) any { return st.Settings.UnauthenticatedPerAddress })},
	{option: "unauthenticated_bodies.per_prefix", before: "unauthenticated_bodies {\n\tper_prefix /48 32\n}",
		after:   "unauthenticated_bodies {\n\tper_prefix /48 4\n\tper_prefix /40 16\n}",
		observe: adminStatus(func(st adminapi.HandlerStatus) any { return st.Settings.UnauthenticatedPerPrefix })},
	{option: "hooks.body_timeout", before: "body_timeout 10s", after: "body_timeout 100ms", observe: slowBody},
	{option: "hooks.ipv6_prefix", before: "auth_failures 1\nipv6_prefix 64", after: "auth_failures 1\nipv6_prefix 48",
		observe: func(e *reloadEnv) string {
			e.n++
			net := fmt.Sprintf("2001:db8:%x:", e.n)
			e.do(http.MethodPost, "/hooks/wake", `{}`, "X-Forwarded-For: "+net+"7::1", "Authorization: Bearer "+rtAltHookToken)
			var locks []adminapi.Lockout
			e.admin.call(http.MethodGet, "/hooks/lockouts", "", http.StatusOK, &locks)
			for _, l := range locks {
				if strings.HasPrefix(l.Address, net) {
					_, bits, _ := strings.Cut(l.Address, "/")
					return "listed as /" + bits
				}
			}
			return fmt.Sprintf("not listed: %+v", locks)
		}},
	{option: "hooks.lockout_table_size", before: "lockout_table_size 65536", after: "lockout_table_size 131072",
		observe: adminStatus(func(st adminapi.HandlerStatus) any { return st.Settings.LockoutTableSize })},
	{option: "hooks.idempotency_ttl", before: "idempotency_ttl 10m", after: "idempotency_ttl 1m",
		observe: adminStatus(func(st adminapi.HandlerStatus) any { return st.Settings.IdempotencyTTLSeconds })},
	{option: "hooks.agents", before: "", after: "agents main ops",
		observe: func(e *reloadEnv) string {
			return e.sent(e.gw, func() result { return e.send("/hooks/agent", `{"message":"m","agentId":"ghost"}`, false) },
				func(r devgw.Received) string { return fmt.Sprint("agentId ", r.Body["agentId"]) })
		}},
	{option: "hooks.allowed_agent_ids", before: "", after: "allowed_agent_ids main",
		observe: statusOf("/hooks/agent", `{"message":"m","agentId":"ops"}`)},
	{option: "hooks.default_session_key", before: "", after: "default_session_key hook:edge",
		observe: func(e *reloadEnv) string {
			return e.sent(e.gw, func() result { return e.send("/hooks/agent", `{"message":"m"}`, false) },
				func(r devgw.Received) string { return fmt.Sprint("edge key: ", r.Body["sessionKey"] == "hook:edge") })
		}},
	{option: "hooks.allow_request_session_key", before: "allowed_session_key_prefixes hook:",
		after:   "allowed_session_key_prefixes hook:\nallow_request_session_key",
		observe: statusOf("/hooks/agent", `{"message":"m","sessionKey":"hook:x"}`)},
	{option: "hooks.allowed_session_key_prefixes", before: "allow_request_session_key\nallowed_session_key_prefixes hook:",
		after:   "allow_request_session_key\nallowed_session_key_prefixes hook: x:",
		observe: statusOf("/hooks/agent", `{"message":"m","sessionKey":"x:1"}`)},
	{option: "hooks.allowed_models", before: "", after: "allowed_models openai/gpt-5",
		observe: statusOf("/hooks/agent", `{"message":"m","model":"anthropic/claude-x"}`)},
	{option: "hooks.channels", before: "", after: "channels last telegram",
		observe: statusOf("/hooks/agent", `{"message":"m","channel":"whatsapp","to":"+15550100"}`)},
	{option: "hooks.mapping", before: "", after: mappingM(`message_template "x"`), observe: statusOf("/hooks/m", `{}`)},
	{option: "hooks.presets", before: "allow_request_session_key\nallowed_session_key_prefixes hook:",
		after:   "allow_request_session_key\nallowed_session_key_prefixes hook:\npresets gmail",
		observe: statusOf("/hooks/gmail", `{"messages":[{"id":"1","from":"a@example.com","subject":"s","snippet":"x","body":"b"}]}`)},
	{option: "hooks.cel_cost_limit", before: "cel_cost_limit 100000\n" + mappingM("match_expr `payload.items.all(x, x > 0)`", "message_template x"),
		after:   "cel_cost_limit 100\n" + mappingM("match_expr `payload.items.all(x, x > 0)`", "message_template x"),
		observe: statusOf("/hooks/m", `{"items":[`+strings.Repeat("1,", 499)+`1]}`)},
	{option: "hooks.transforms_root", before: "transforms_root @TR@/a\n" + mappingM("transform t.js"),
		after: "transforms_root @TR@/b\n" + mappingM("transform t.js"), observe: messageHas("/hooks/m", `{}`, "from a", "from b")},
	{option: "hooks.transforms_dir", before: "transforms_dir @TR@/a\n" + mappingM("transform t.js"),
		after: "transforms_dir @TR@/b\n" + mappingM("transform t.js"), observe: messageHas("/hooks/m", `{}`, "from a", "from b")},
	// (the budget is the call thread's CPU time, slow.js spins 500 ms of
	// wall-clock time: on a busy machine that thread may get less than
	// 50 ms of CPU in them, never less than 1 ms)
	{option: "hooks.transform_timeout", before: "transform_timeout 10s\n" + mappingM("transform slow.js"),
		after: "transform_timeout 1ms\n" + mappingM("transform slow.js"), observe: statusOf("/hooks/m", `{}`)},
	{option: "hooks.transform_max_memory", before: "transform_max_memory 8MiB\n" + mappingM("transform big.js"),
		after: "transform_max_memory 1MiB\n" + mappingM("transform big.js"), observe: statusOf("/hooks/m", `{}`)},
	{option: "hooks.spool", before: "", after: "spool @DIR@/spool",
		observe: spoolSetting(func(s *adminapi.Spool) any { return "a spool" })},
	{option: "hooks.enabled", before: "enabled true", after: "enabled false",
		observe: func(e *reloadEnv) string { return e.send("/hooks/wake", `{"text":"t"}`, false).body }},
	{option: "hooks.cluster", before: "", after: natsBlock(),
		observe: adminStatus(func(st adminapi.HandlerStatus) any {
			if st.Cluster == nil {
				return "no cluster"
			}
			return "cluster " + st.Cluster.Name
		})},

	// spool { … }
	{option: "spool.max_bytes", before: spoolBlock("max_bytes 1GiB"), after: spoolBlock("max_bytes 10MiB"),
		observe: spoolSetting(func(s *adminapi.Spool) any { return s.MaxBytes })},
	{option: "spool.max_age", before: spoolBlock("max_age 72h"), after: spoolBlock("max_age 1h"),
		observe: spoolSetting(func(s *adminapi.Spool) any { return s.MaxAgeSeconds })},
	{option: "spool.retry_initial", before: spoolBlock("retry_initial 1s"), after: spoolBlock("retry_initial 2s"),
		observe: spoolSetting(func(s *adminapi.Spool) any { return s.RetryInitialSeconds })},
	{option: "spool.retry_max", before: spoolBlock("retry_max 5m"), after: spoolBlock("retry_max 10m"),
		observe: spoolSetting(func(s *adminapi.Spool) any { return s.RetryMaxSeconds })},
	{option: "spool.workers", before: spoolBlock("workers 4"), after: spoolBlock("workers 6"),
		observe: spoolSetting(func(s *adminapi.Spool) any { return s.Workers })},
	{option: "spool.max_identical_errors", before: spoolBlock("max_identical_errors 10"), after: spoolBlock("max_identical_errors 3"),
		observe: spoolSetting(func(s *adminapi.Spool) any { return s.MaxIdenticalErrors })},
	{option: "spool.rate", before: spoolBlock("workers 4"), after: spoolBlock("rate 5/s"),
		observe: spoolSetting(func(s *adminapi.Spool) any { return s.Rate })},
	{option: "spool.deliver", before: natsBlockAt("@NATSUP@") + "\nspool cluster {\n\tdeliver on\n\tfallback reject\n}",
		after:   natsBlockAt("@NATSUP@") + "\nspool cluster {\n\tdeliver off\n\tfallback reject\n}",
		observe: spoolSetting(func(s *adminapi.Spool) any { return fmt.Sprint("delivering ", s.Delivering) })},
	{option: "spool.fallback", before: natsBlock() + "\nspool cluster {\n\tfallback reject\n}",
		after:   natsBlock() + "\nspool cluster {\n\tfallback @DIR@/fallback\n}",
		observe: statusOf("/hooks/agent", `{"message":"m"}`)},

	// cluster nats { … } (on a server nothing answers: the settings of the
	// connection in use, as the admin API shows them)
	{option: "cluster.url", before: natsBlock(), after: natsBlock("url nats://127.0.0.1:2"), observe: clusterSetting("urls")},
	{option: "cluster.urls", before: natsBlock(), after: natsBlock("urls nats://127.0.0.1:2 nats://127.0.0.1:3"), observe: clusterSetting("urls")},
	{option: "cluster.name", before: natsBlock("name alpha"), after: natsBlock("name beta"), observe: clusterSetting("name")},
	{option: "cluster.replicas", before: natsBlock("replicas 1"), after: natsBlock("replicas 3"), observe: clusterSetting("replicas")},
	{option: "cluster.credentials", before: natsBlock("credentials @DIR@/a.creds"), after: natsBlock("credentials @DIR@/b.creds"),
		observe: clusterSetting("credentials")},
	{option: "cluster.user", before: natsBlock("user ua", "password p"), after: natsBlock("user ub", "password p"), observe: clusterSetting("user")},
	{option: "cluster.password", before: natsBlock("user u", "password {env.CADDYHOOK_RT_A}"),
		after: natsBlock("user u", "password {env.CADDYHOOK_RT_B}"), observe: clusterSetting("password")},
	{option: "cluster.token", before: natsBlock("token {env.CADDYHOOK_RT_A}"), after: natsBlock("token {env.CADDYHOOK_RT_B}"),
		observe: clusterSetting("token")},
	{option: "cluster.nkey", before: natsBlock("nkey @DIR@/nkA.seed"), after: natsBlock("nkey @DIR@/nkB.seed"), observe: clusterSetting("nkey")},
	{option: "cluster.tls", before: natsBlock(), after: natsBlock("tls {\n\t\tca @DIR@/tls.pem\n\t}"), observe: clusterSetting("tls.ca")},
	{option: "cluster.ca", before: natsBlock("tls {\n\t\tca @DIR@/tls.pem\n\t}"), after: natsBlock("tls {\n\t\tca @DIR@/tls-copy.pem\n\t}"),
		observe: clusterSetting("tls.ca")},
	{option: "cluster.cert", before: natsBlock("tls {\n\t\tcert @DIR@/tls.pem\n\t\tkey @DIR@/tls.key\n\t}"),
		after: natsBlock("tls {\n\t\tcert @DIR@/tls-copy.pem\n\t\tkey @DIR@/tls.key\n\t}"), observe: clusterSetting("tls.cert")},
	{option: "cluster.key", before: natsBlock("tls {\n\t\tcert @DIR@/tls.pem\n\t\tkey @DIR@/tls.key\n\t}"),
		after: natsBlock("tls {\n\t\tcert @DIR@/tls.pem\n\t\tkey @DIR@/tls-copy.key\n\t}"), observe: clusterSetting("tls.key")},
	{option: "cluster.timeout", before: natsBlock("timeout 100ms"), after: natsBlock("timeout 150ms"), observe: clusterSetting("timeout")},
	{option: "cluster.ack_wait", before: natsBlock("ack_wait 40s"), after: natsBlock("ack_wait 50s"), observe: clusterSetting("ack_wait")},
	{option: "cluster.signing_key", before: natsBlock("signing_key {env.CADDYHOOK_RT_A}"), after: natsBlock("signing_key {env.CADDYHOOK_RT_B}"),
		observe: clusterSetting("signing_keys")},
	{option: "cluster.signing_keys", before: natsBlock("signing_keys {env.CADDYHOOK_RT_A}"),
		after: natsBlock("signing_keys {env.CADDYHOOK_RT_A} {env.CADDYHOOK_RT_B}"), observe: clusterSetting("signing_keys")},
	{option: "cluster.clock_skew", before: natsBlock("clock_skew 2s"), after: natsBlock("clock_skew 5s"), observe: clusterSetting("clock_skew")},
	{option: "cluster.accept_unsealed_until", before: natsBlock(), after: natsBlock("accept_unsealed_until " + time.Now().Add(72*time.Hour).UTC().Format(time.RFC3339)),
		observe: clusterSetting("accept_unsealed_until")},
	{option: "cluster.duplicate_window", before: natsBlock("duplicate_window 1h"), after: natsBlock("duplicate_window 2h"),
		observe: clusterSetting("duplicate_window")},

	// events { … }
	{option: "hooks.events", before: "", after: "events off", observe: eventsSetting(func(*adminapi.Events) any { return "events on" })},
	{option: "events.bodies", before: eventsBlock("bodies off"), after: eventsBlock("bodies on"),
		observe: eventsSetting(func(s *adminapi.Events) any { return s.Bodies })},
	{option: "events.max_body", before: eventsBlock("max_body 64KiB"), after: eventsBlock("max_body 32KiB"),
		observe: eventsSetting(func(s *adminapi.Events) any { return s.MaxBody })},
	{option: "events.max_events", before: eventsBlock("max_events 10000"), after: eventsBlock("max_events 500"),
		observe: eventsSetting(func(s *adminapi.Events) any { return s.MaxEvents })},
	{option: "events.max_bytes", before: eventsBlock("max_bytes 16MiB"), after: eventsBlock("max_bytes 8MiB"),
		observe: eventsSetting(func(s *adminapi.Events) any { return s.MaxBytes })},
	{option: "events.retain", before: eventsBlock("retain 24h"), after: eventsBlock("retain 1h"),
		observe: eventsSetting(func(s *adminapi.Events) any { return s.RetainSeconds })},
	{option: "events.max_rejections", before: eventsBlock("max_rejections 10000"), after: eventsBlock("max_rejections 100"),
		observe: eventsSetting(func(s *adminapi.Events) any { return s.MaxRejections })},
	{option: "events.dir", before: eventsBlock("dir @DIR@/ev1"), after: eventsBlock("dir @DIR@/ev2"),
		observe: eventsSetting(func(s *adminapi.Events) any { return filepath.Base(s.Dir) })},
	{option: "events.headers", before: eventsBlock("headers X-One"), after: eventsBlock("headers X-Two"),
		observe: eventsSetting(func(s *adminapi.Events) any { return s.Headers })},

	// hooks_console { … } (a directive of its own, in the site)
	{option: "hooks_console.insecure_no_auth", site: true, before: "handle_path /ops/* {\n\t\thooks_console\n\t}",
		after:   "handle_path /ops/* {\n\t\thooks_console {\n\t\t\tinsecure_no_auth\n\t\t}\n\t}",
		observe: func(e *reloadEnv) string { return fmt.Sprint(e.do(http.MethodGet, "/ops/", "").status) }},
	{option: "hooks_console.user_header", site: true, before: forwardAuthConsole(""), after: forwardAuthConsole(" {\n\t\t\tuser_header Remote-User\n\t\t}"),
		observe: func(e *reloadEnv) string {
			return fmt.Sprint(e.do(http.MethodGet, "/ops/", "", "Cookie: session=op").status)
		}},

	// mapping { … }
	{option: "mapping.match_path", before: "mapping m {\n\tmatch_path a\n\tmessage_template x\n}", after: mappingM("message_template x"),
		observe: statusOf("/hooks/m", `{}`)},
	{option: "mapping.match_source", before: mappingM("message_template x"), after: mappingM("match_source github", "message_template x"),
		observe: statusOf("/hooks/m", `{"source":"gitlab"}`)},
	{option: "mapping.match_expr", before: mappingM("message_template x"), after: mappingM(`match_expr "payload.ok == true"`, "message_template x"),
		observe: statusOf("/hooks/m", `{"ok":false}`)},
	{option: "mapping.action", before: mappingM("action agent", "message_template x"), after: mappingM("action wake", "text_template x"),
		observe: func(e *reloadEnv) string {
			return e.sent(e.gw, func() result { return e.send("/hooks/m", `{}`, false) }, func(r devgw.Received) string { return r.Kind })
		}},
	{option: "mapping.wake_mode", before: mappingM("action wake", "text_template x", "wake_mode now"),
		after: mappingM("action wake", "text_template x", "wake_mode next-heartbeat"), observe: agentField("mode")},
	{option: "mapping.name", before: mappingM("message_template x", "name Alpha"), after: mappingM("message_template x", "name Beta"),
		observe: agentField("name")},
	{option: "mapping.agent_id", before: mappingM("message_template x", "agent_id main"), after: mappingM("message_template x", "agent_id ops"),
		observe: agentField("agentId")},
	{option: "mapping.session_key", before: mappingM("message_template x", "session_key hook:a"),
		after: mappingM("message_template x", "session_key hook:b"), observe: agentField("sessionKey")},
	{option: "mapping.message_template", before: mappingM(`message_template "from a"`), after: mappingM(`message_template "from b"`),
		observe: messageHas("/hooks/m", `{}`, "from a", "from b")},
	{option: "mapping.text_template", before: mappingM("action wake", `text_template "from a"`), after: mappingM("action wake", `text_template "from b"`),
		observe: agentField("text")},
	{option: "mapping.deliver", before: mappingM("message_template x", "deliver true"), after: mappingM("message_template x", "deliver false"),
		observe: agentField("deliver")},
	{option: "mapping.channel", before: mappingM("message_template x", "channel telegram", "to 1"),
		after: mappingM("message_template x", "channel discord", "to 1"), observe: agentField("channel")},
	{option: "mapping.to", before: mappingM("message_template x", "channel telegram", "to 1"),
		after: mappingM("message_template x", "channel telegram", "to 2"), observe: agentField("to")},
	{option: "mapping.model", before: mappingM("message_template x", "model openai/gpt-5"),
		after: mappingM("message_template x", "model anthropic/claude-x"), observe: agentField("model")},
	{option: "mapping.thinking", before: mappingM("message_template x", "thinking low"), after: mappingM("message_template x", "thinking high"),
		observe: agentField("thinking")},
	{option: "mapping.timeout_seconds", before: mappingM("message_template x", "timeout_seconds 10"),
		after: mappingM("message_template x", "timeout_seconds 20"), observe: agentField("timeoutSeconds")},
	{option: "mapping.allow_unsafe_external_content", before: mappingM("message_template x"),
		after: mappingM("message_template x", "allow_unsafe_external_content"), observe: messageHas("/hooks/m", `{}`, "<<<EXTERNAL_UNTRUSTED_CONTENT")},
	{option: "mapping.for_each", before: mappingM("message_template x"), after: mappingM("message_template x", "for_each items"),
		observe: func(e *reloadEnv) string {
			n := e.gw.Count("")
			if r := e.send("/hooks/m", `{"items":[1,2]}`, false); r.status != http.StatusOK {
				return status(r)
			}
			return fmt.Sprint("dispatched ", e.gw.Count("")-n)
		}},
	{option: "mapping.max_body", before: mappingM("message_template x", "max_body 1MiB"), after: mappingM("message_template x", "max_body 100"),
		observe: statusOf("/hooks/m", `{"pad":"`+strings.Repeat("p", 200)+`"}`)},
	{option: "mapping.transform", before: mappingM("transform t.js"), after: mappingM("transform t2.js"),
		observe: messageHas("/hooks/m", `{}`, "from t", "from t2")},
	{option: "mapping.verify", before: mappingM("message_template x"), after: mappingM("message_template x", "verify github {\n\t\tsecret "+rtSecretA+"\n\t}"),
		observe: githubSignedPost(rtSecretA)},
	{option: "mapping.require_token", before: mappingM("message_template x", "verify github {\n\t\tsecret "+rtSecretA+"\n\t}"),
		after:   mappingM("message_template x", "require_token", "verify github {\n\t\tsecret "+rtSecretA+"\n\t}"),
		observe: githubSignedPost(rtSecretA)},
	{option: "mapping.forward", before: mappingM("message_template x"), after: mappingM("forward"),
		observe: func(e *reloadEnv) string {
			return e.sent(e.gw, func() result { return e.send("/hooks/m", `{"a":1}`, false) },
				func(r devgw.Received) string { return r.Kind + " " + r.Path })
		}},

	// transform { … } (the block form of a mapping's transform)
	{option: "transform.module", before: mappingM("transform {\n\t\tmodule t.js\n\t}"), after: mappingM("transform {\n\t\tmodule t2.js\n\t}"),
		observe: messageHas("/hooks/m", `{}`, "from t", "from t2")},
	{option: "transform.export", before: mappingM("transform {\n\t\tmodule multi.js\n\t\texport a\n\t}"),
		after: mappingM("transform {\n\t\tmodule multi.js\n\t\texport b\n\t}"), observe: messageHas("/hooks/m", `{}`, "export a", "export b")},

	// verify <scheme> { … }
	{option: "verify.secret", before: verifyV("secret "+rtSecretA, "header X-Sig"), after: verifyV("secret "+rtSecretB, "header X-Sig"),
		observe: signedPost("X-Sig", "", "sha256", "hex", "{body}", 0)},
	{option: "verify.header", before: verifyV("secret "+rtSecretA, "header X-Sig"), after: verifyV("secret "+rtSecretA, "header X-Other-Sig"),
		observe: signedPost("X-Sig", "", "sha256", "hex", "{body}", 0)},
	{option: "verify.prefix", before: verifyV("secret "+rtSecretA, "header X-Sig", "prefix sha256="),
		after: verifyV("secret "+rtSecretA, "header X-Sig", "prefix v1="), observe: signedPost("X-Sig", "sha256=", "sha256", "hex", "{body}", 0)},
	{option: "verify.algorithm", before: verifyV("secret "+rtSecretA, "header X-Sig", "algorithm sha256"),
		after: verifyV("secret "+rtSecretA, "header X-Sig", "algorithm sha512"), observe: signedPost("X-Sig", "", "sha256", "hex", "{body}", 0)},
	{option: "verify.encoding", before: verifyV("secret "+rtSecretA, "header X-Sig", "encoding hex"),
		after: verifyV("secret "+rtSecretA, "header X-Sig", "encoding base64"), observe: signedPost("X-Sig", "", "sha256", "hex", "{body}", 0)},
	{option: "verify.layout", before: verifyV("secret "+rtSecretA, "header X-Sig", "layout {body}"),
		after: verifyV("secret "+rtSecretA, "header X-Sig", "layout v0:{body}"), observe: signedPost("X-Sig", "", "sha256", "hex", "{body}", 0)},
	{option: "verify.timestamp_header", before: verifyV("secret "+rtSecretA, "header X-Sig"),
		after:   verifyV("secret "+rtSecretA, "header X-Sig", "timestamp_header X-Ts", "layout {timestamp}.{body}"),
		observe: signedPost("X-Sig", "", "sha256", "hex", "{body}", 0)},
	{option: "verify.tolerance", before: verifyV("secret "+rtSecretA, "header X-Sig", "timestamp_header X-Ts", "layout {timestamp}.{body}", "tolerance 5m"),
		after:   verifyV("secret "+rtSecretA, "header X-Sig", "timestamp_header X-Ts", "layout {timestamp}.{body}", "tolerance 1m"),
		observe: signedPost("X-Sig", "", "sha256", "hex", "{timestamp}.{body}", 2*time.Minute)},
	{option: "verify.id_header", before: verifyV("secret "+rtSecretA, "header X-Sig"), after: verifyV("secret "+rtSecretA, "header X-Sig", "id_header X-Delivery"),
		observe: func(e *reloadEnv) string {
			body := `{"event":"ping"}`
			sig := "X-Sig: " + signedHMAC(rtSecretA, "sha256", "hex", "{body}", "", body)
			return dispatches("/hooks/v", body, true, func(k string) []string { return []string{sig, "X-Delivery: " + k} })(e)
		}},
	// the words of the other providers (issue 29): each observed through
	// a request its provider signs with the before value
	{option: "verify.public_key", before: providerP("discord", "public_key "+pvDiscordPublicKey()), after: providerP("discord", "public_key "+rtDiscordKeyB),
		observe: func(e *reloadEnv) string {
			ping := `{"id":"1","type":1}`
			return status(e.send("/hooks/p", ping, true, discordHeaders(pvDiscordKey, ping, time.Now())...))
		}},
	{option: "verify.verify_token", before: providerP("meta", "secret "+rtSecretA, "verify_token "+pvMetaToken),
		after: providerP("meta", "secret "+rtSecretA, "verify_token "+rtSecretB),
		observe: func(e *reloadEnv) string {
			return status(e.do(http.MethodGet, "/hooks/p?hub.mode=subscribe&hub.challenge=42&hub.verify_token="+pvMetaToken, "", "X-Forwarded-For: "+e.addr()))
		}},
	{option: "verify.public_url", before: providerP("twilio", "secret "+rtSecretA, "public_url https://a.example.com"),
		after: providerP("twilio", "secret "+rtSecretA, "public_url https://b.example.com"),
		observe: func(e *reloadEnv) string {
			form := "MessageSid=SM1&Body=hi"
			return status(e.send("/hooks/p", form, true, twilioHeaders(rtSecretA, "https://a.example.com/hooks/p", form)...))
		}},
	{option: "verify.audience", before: pubsubP("audience https://a.example.com/p", "service_account "+mxPubSubAccount, "jwks @DIR@/jwks-a.json"),
		after:   pubsubP("audience https://b.example.com/p", "service_account "+mxPubSubAccount, "jwks @DIR@/jwks-a.json"),
		observe: pubsubPost("https://a.example.com/p")},
	{option: "verify.service_account", before: pubsubP("audience https://a.example.com/p", "service_account "+mxPubSubAccount, "jwks @DIR@/jwks-a.json"),
		after:   pubsubP("audience https://a.example.com/p", "service_account other@p.iam.gserviceaccount.com", "jwks @DIR@/jwks-a.json"),
		observe: pubsubPost("https://a.example.com/p")},
	{option: "verify.jwks", before: pubsubP("audience https://a.example.com/p", "service_account "+mxPubSubAccount, "jwks @DIR@/jwks-a.json"),
		after:   pubsubP("audience https://a.example.com/p", "service_account "+mxPubSubAccount, "jwks @DIR@/jwks-b.json"),
		observe: pubsubPost("https://a.example.com/p")},
	// SNS without a fetch: a stale message is refused for its time only
	// once its topic and certificate host are accepted, so the reason
	// tells which check refused it
	{option: "verify.cert_hosts", before: providerP("sns", "topic "+rtTopicA, "cert_hosts sns.eu-west-1.amazonaws.com"),
		after: providerP("sns", "topic "+rtTopicA, "cert_hosts sns.us-east-1.amazonaws.com"), observe: staleSNS(rtTopicA)},
	{option: "verify.topic", before: providerP("sns", "topic "+rtTopicA), after: providerP("sns", "topic "+rtTopicA+"-other"), observe: staleSNS(rtTopicA)},
	{option: "verify.client_state", before: providerP("msgraph", "client_state "+rtSecretA), after: providerP("msgraph", "client_state "+rtSecretB),
		observe: func(e *reloadEnv) string {
			body := `{"value":[{"clientState":"` + rtSecretA + `","changeType":"created","resource":"me/messages/1"}]}`
			return status(e.send("/hooks/p", body, true))
		}},
	{option: "verify.encrypt_key", before: providerP("feishu", "verify_token "+pvFeishuToken, "encrypt_key "+rtSecretA),
		after: providerP("feishu", "verify_token "+pvFeishuToken, "encrypt_key "+rtSecretB),
		observe: func(e *reloadEnv) string {
			body := feishuBody(rtSecretA, `{"schema":"2.0","header":{"event_id":"`+e.key()+`","event_type":"x","token":"`+pvFeishuToken+`"},"event":{}}`)
			return status(e.send("/hooks/p", body, true, feishuHeaders(rtSecretA, body, time.Now())...))
		}},
	{option: "verify.secret_file", before: providerP("asana", "secret_file @DIR@/asana-a"), after: providerP("asana", "secret_file @DIR@/asana-b"),
		observe: func(e *reloadEnv) string {
			body := `{"events":[{"action":"changed","resource":{"gid":"1","resource_type":"task"}}]}`
			return status(e.send("/hooks/p", body, true, "X-Hook-Signature: "+signedHMAC(rtSecretA, "sha256", "hex", "{body}", "", body)))
		}},
}

// rtDiscordKeyB is another Ed25519 public key than the discord tests'.
var rtDiscordKeyB = func() string { pub, _ := mustEd25519(); return hex.EncodeToString(pub) }()

// rtTopicA is the SNS topic of the table.
const rtTopicA = "arn:aws:sns:eu-west-1:123456789012:rt-alarms"

// providerP is a mapping answering /hooks/p with only a verify block for
// provider, of lines.
func providerP(provider string, lines ...string) string {
	return "mapping p {\n\tmatch_path p\n\tverify " + provider + " {\n\t\t" + strings.Join(lines, "\n\t\t") + "\n\t}\n}"
}

// pubsubP is providerP for pubsub.
func pubsubP(lines ...string) string { return providerP("pubsub", lines...) }

// pubsubPost is an observation: a Pub/Sub push for audience, as the
// table's service account, under the key of jwks-a.json.
func pubsubPost(audience string) func(e *reloadEnv) string {
	return func(e *reloadEnv) string {
		body := `{"message":{"messageId":"` + e.key() + `","data":"e30="},"subscription":"projects/p/subscriptions/s"}`
		return status(e.send("/hooks/p", body, true, pubsubHeaders(audience, mxPubSubAccount, time.Now())...))
	}
}

// staleSNS is an observation: an SNS notification on topic two hours
// old, with a certificate on sns.eu-west-1.amazonaws.com, and the reason
// it was refused (from the rejection log line of its client address).
func staleSNS(topic string) func(e *reloadEnv) string {
	return func(e *reloadEnv) string {
		addr := e.addr()
		body := `{"Type":"Notification","MessageId":"` + e.key() + `","TopicArn":"` + topic + `","Message":"x","Timestamp":"` +
			time.Now().Add(-2*time.Hour).UTC().Format(time.RFC3339) + `","SignatureVersion":"2","Signature":"c2ln",` +
			`"SigningCertURL":"https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-x.pem"}`
		r := e.do(http.MethodPost, "/hooks/p", body, "X-Forwarded-For: "+addr, "Content-Type: text/plain; charset=UTF-8")
		reason := ""
		testkit.WaitForState(e.t, func() string { return "a rejection line for " + addr }, func() bool {
			for _, line := range strings.Split(e.logs(), "\n") {
				if strings.Contains(line, `"client_ip":"`+addr+`"`) && strings.Contains(line, "hook request rejected") {
					var l struct{ Reason string }
					_ = json.Unmarshal([]byte(line), &l)
					reason = l.Reason
					return true
				}
			}
			return false
		})
		return fmt.Sprintf("%d %s", r.status, reason)
	}
}

// TestReloadAppliesEveryOption runs reloadRows (see the top of the file).
func TestReloadAppliesEveryOption(t *testing.T) {
	for _, row := range reloadRows {
		t.Run(row.option, func(t *testing.T) {
			e := newReloadEnv(t)
			if err := e.load(row.before, row.site); err != nil {
				t.Fatalf("before: %v", err)
			}
			before := row.observe(e)
			err := e.load(row.after, row.site)
			if row.refused != "" {
				if err == nil || !strings.Contains(err.Error(), row.refused) {
					t.Fatalf("reload: %v, want it refused naming %q", err, row.refused)
				}
				if got := row.observe(e); got != before {
					t.Fatalf("after the refused reload: %q, want the running config's %q", got, before)
				}
				return
			}
			if err != nil {
				t.Fatalf("reload: %v", err)
			}
			reloaded := row.observe(e)
			if err := caddy.Stop(); err != nil {
				t.Fatal(err)
			}
			if err := e.load(row.after, row.site); err != nil {
				t.Fatalf("fresh start: %v", err)
			}
			fresh := row.observe(e)
			if fresh == before {
				t.Fatalf("the observation does not tell the settings apart: %q before and after", before)
			}
			if reloaded != fresh {
				t.Errorf("after the reload: %q; after a fresh start with the same config: %q (before: %q)", reloaded, fresh, before)
			}
		})
	}
}

// parserOptions reads the subdirectives the Caddyfile parsers accept from
// their source, as block.option (internal/optdoc: the list the generated
// docs/reference.md shows).
func parserOptions(t *testing.T) map[string]bool {
	t.Helper()
	blocks, err := optdoc.ParserOptions(".")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for block, opts := range blocks {
		for _, o := range opts {
			out[block+"."+o] = true
		}
	}
	return out
}

// docOptions reads the options the documentation shows: every
// subdirective of a hooks, mapping, spool, cluster, verify or other block
// in the caddyfile blocks of README.md and docs/*.md, the syntax of the
// generated reference included (comments are not read). The reference's
// option tables are the parsers' own list (internal/optdoc), so they need
// no check here.
func docOptions(t *testing.T) map[string]bool {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var docs strings.Builder
	for _, p := range append([]string{filepath.Join("..", "README.md")}, pages...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	readme := docs.String()
	out := map[string]bool{}
	fences := strings.Split(readme, "```caddyfile")
	for _, fence := range fences[1:] {
		_, fence, _ = strings.Cut(fence, "\n") // the rest of the info string
		fence, _, _ = strings.Cut(fence, "\n```")
		var stack []string // the block names; "" for a block that is not the hooks directive's
		for _, line := range strings.Split(fence, "\n") {
			if i := strings.Index(line, "#"); i >= 0 && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
				line = line[:i]
			}
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			if strings.HasPrefix(line, "}") {
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
				continue
			}
			kw := strings.Fields(line)[0]
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			if parent != "" && optdoc.OptionName.MatchString(kw) {
				out[parent+"."+kw] = true
			}
			if !strings.HasSuffix(line, "{") {
				continue
			}
			child := ""
			switch {
			case kw == "hooks":
				child = "hooks"
			case parent == "cluster" && kw == "tls":
				child = "cluster" // the parser reads tls { ca cert key } as the engine's options
			case parent != "":
				child = kw
			case len(stack) == 0 && (kw == "mapping" || kw == "spool" || kw == "verify"):
				child = kw // a reference block on its own
			}
			stack = append(stack, child)
		}
	}
	return out
}

// referenceOptions reads the option lines of docs/reference.md: the rows
// | `option` | … (or | `option`, `option` | …) of the table under each block's heading (## `hooks`,
// ## `cluster nats`, …), as block.option.
func referenceOptions(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile("^## `([a-z_]+)[^`]*`$")
	row := regexp.MustCompile("^\\| (`[a-z0-9_]+`(?:, `[a-z0-9_]+`)*) \\|")
	name := regexp.MustCompile("`([a-z0-9_]+)`")
	out, block := map[string]bool{}, ""
	for _, line := range strings.Split(string(b), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			block = m[1]
		} else if strings.HasPrefix(line, "## ") {
			block = ""
		} else if m := row.FindStringSubmatch(line); m != nil && block != "" {
			for _, n := range name.FindAllStringSubmatch(m[1], -1) {
				out[block+"."+n[1]] = true // a row may document several: `user`, `password`
			}
		}
	}
	return out
}

// TestReloadTableCoversEveryOption (issue 25): every option of the
// documentation (docs/reference.md and the Caddyfile examples of README.md
// and docs/) and every subdirective the Caddyfile parsers read has a row
// in reloadRows, and every row names an option the parsers read. Every
// option the parsers read has its option line in docs/reference.md, and
// every option line there is one the parsers read.
func TestReloadTableCoversEveryOption(t *testing.T) {
	parsed, documented, lines := parserOptions(t), docOptions(t), referenceOptions(t)
	if len(parsed) < 50 || len(documented) < 40 || len(lines) < 50 {
		t.Fatalf("read %d options from the parsers, %d from the documentation's examples and %d option lines from docs/reference.md: the readers are broken",
			len(parsed), len(documented), len(lines))
	}
	noLine, staleLine := notIn(parsed, lines), notIn(lines, parsed)
	if len(noLine) > 0 {
		t.Errorf("options without their line in docs/reference.md (document the field and run go run ./internal/docgen): %s", strings.Join(noLine, ", "))
	}
	if len(staleLine) > 0 {
		t.Errorf("docs/reference.md has option lines the Caddyfile parsers do not read (run go run ./internal/docgen): %s", strings.Join(staleLine, ", "))
	}
	rows := map[string]bool{}
	for _, r := range reloadRows {
		if rows[r.option] {
			t.Errorf("two rows for %s", r.option)
		}
		rows[r.option] = true
	}
	missing, unparsed, stale := notIn(parsed, rows), notIn(documented, parsed), notIn(rows, parsed)
	if len(missing) > 0 {
		t.Errorf("options without a row in reloadRows (add one: what a reload must change, and how to see it): %s", strings.Join(missing, ", "))
	}
	if len(unparsed) > 0 {
		t.Errorf("the documentation shows options the Caddyfile parsers do not read (or optdoc.ParserBlocks misses their block): %s", strings.Join(unparsed, ", "))
	}
	if len(stale) > 0 {
		t.Errorf("rows for options the Caddyfile parsers do not read: %s", strings.Join(stale, ", "))
	}
}

// notIn returns the keys of a that b lacks, sorted.
func notIn(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
