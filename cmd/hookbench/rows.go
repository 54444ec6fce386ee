package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// rowDef describes one measurement row: the Caddy site it runs against,
// the request it repeats and what the answer and the ratio must be.
type rowDef struct {
	id     string
	title  string
	site   string // site block lines, expanded by benchEnv.expand
	path   string
	body   string
	expect int
	// badToken sends a wrong token of the right length.
	badToken bool
	source   sourceKind
	// bindOnly keeps a srcSpread row on bound source addresses whatever
	// -spread says: row (j) measures exactly that connection churn.
	bindOnly bool
	// base is the row the ratio is taken against; target the minimum
	// ratio (0: none) and maxP99 the p99 limit (0: none).
	base   string
	target float64
	maxP99 time.Duration
	// probe marks rows whose directives this build may not have yet:
	// their site is validated with the built binary first.
	probe bool
	// sinkBound rows hand every accepted request to the sink exactly once.
	sinkBound bool
	// nats is the number of NATS JetStream servers (1, or 3 in a cluster)
	// the row's site reaches as {nats<n>}; 0: none. With natsAlways they
	// sync every write before acknowledging it (sync_interval: always),
	// a set of their own reached as {nats<n>always}.
	nats       int
	natsAlways bool
	// twinOf names the row this one repeats with one feature off (the
	// event log): that row must measure at least twinTarget × this one.
	twinOf     string
	twinTarget float64
	// signed names the provider whose signature the request carries
	// instead of the hook token (signed.go).
	signed string
	// costTarget, on a signed row, is the most its ingress CPU per
	// request above its token twin's (v) may be, as a share of row (c)'s
	// (issue 29: an Ed25519 or ECDSA check under 10 %); 0: reported
	// without a target.
	costTarget float64
	// watched rows run with a console open and a cluster tail attached
	// to their handler (watch.go)
	watched bool
}

// tokenTwin is the signed rows' twin with the hook token: their
// signature's cost is their CPU per request above it.
const tokenTwin = "v"

// natsKey names a set of NATS servers: how many, and whether they sync
// every write.
type natsKey struct {
	servers int
	always  bool
}

// natsSet is the row's NATS servers.
func (r rowDef) natsSet() natsKey { return natsKey{r.nats, r.natsAlways} }

// placeholder is the set's client URLs in a site body.
func (k natsKey) placeholder() string {
	if k.always {
		return fmt.Sprintf("{nats%dalways}", k.servers)
	}
	return fmt.Sprintf("{nats%d}", k.servers)
}

// Request bodies.
const (
	wakeBody  = `{"text":"Deploy finished: build 1234 is green","mode":"now"}`
	agentBody = `{"message":"Deploy finished: build 1234 is green. Summarise the changes for the team.",` +
		`"name":"CI","agentId":"ops","sessionKey":"hook:ci:main","model":"fast-model","deliver":false}`
	githubBody = `{"action":"opened","number":42,"pull_request":{"number":42,"title":"Fix the flux capacitor",` +
		`"draft":false,"user":{"login":"doc"},"body":"Adds a 1.21 GW guard."},` +
		`"repository":{"full_name":"acme/timecar"},"sender":{"login":"marty"}}`
)

// Site bodies. {sink}, {dir}, {token} and {gateway_token} are expanded by
// benchEnv.expand.
const (
	policyLines = `agents main ops
		allowed_agent_ids main ops
		allow_request_session_key
		allowed_session_key_prefixes hook:
		allowed_models fast-model smart-model`
	mappingLines = `mapping github-pr {
			match_path github
			match_expr "payload.action == 'opened' && !payload.pull_request.draft"
			name GitHub
			message_template "PR #{{pull_request.number}} {{pull_request.title}} by {{sender.login}} in {{repository.full_name}}"
		}`
	transformLines = `mapping github-ts {
			match_path github-ts
			transform bench.ts
		}`
	spoolLines = `spool {dir}/spool`
)

// clusterLines is a cluster engine on the row's NATS servers, in a
// namespace of the row's own.
func clusterLines(row string, servers int) string {
	return clusterLinesOn(row, natsKey{servers: servers})
}

// clusterLinesOn is clusterLines on the NATS servers k.
func clusterLinesOn(row string, k natsKey) string {
	replicas := ""
	if k.servers > 1 {
		replicas = fmt.Sprintf("\n\t\t\treplicas %d", k.servers)
	}
	return fmt.Sprintf("cluster nats %s {\n\t\t\tname bench_%s%s\n\t\t\tsigning_key {cluster_key}\n\t\t}", k.placeholder(), row, replicas)
}

// clusterSpoolLines adds the replicated queue to clusterLines.
func clusterSpoolLines(row string, servers int) string {
	return clusterSpoolLinesOn(row, natsKey{servers: servers})
}

// clusterSpoolLinesOn is clusterSpoolLines on the NATS servers k.
func clusterSpoolLinesOn(row string, k natsKey) string {
	return clusterLinesOn(row, k) + "\n\t\tspool cluster {\n\t\t\tfallback reject\n\t\t}"
}

// transformModule is the TypeScript module of row (h), written to
// <dir>/hooks/transforms/bench.ts.
const transformModule = `interface User { login: string }
interface PullRequest { number: number; title: string; draft: boolean; user: User }
interface Payload { action: string; pull_request: PullRequest; repository: { full_name: string }; sender: User }
interface Ctx { payload: Payload }

export default function transform(ctx: Ctx) {
	const p = ctx.payload;
	if (p.action !== "opened" || p.pull_request.draft) return null;
	return {
		kind: "agent",
		name: "GitHub",
		message: ` + "`PR #${p.pull_request.number} ${p.pull_request.title} by ${p.sender.login} in ${p.repository.full_name}`" + `,
	};
}
`

// hooksSite returns a hooks block with the common lines plus extra.
func hooksSite(extra string) string {
	s := "hooks {\n\t\ttoken {token}\n\t\tgateway unix/{sink}\n\t\tgateway_token {gateway_token}\n"
	if extra != "" {
		s += "\t\t" + extra + "\n"
	}
	return s + "\t}"
}

// The event log is on by default: rows (c) and (e) measure it, and rows
// (q) and (r) are the same with `events off`, so that its cost is the
// ratio of each pair.

// rowCatalogue lists every row in display order.
func rowCatalogue() []rowDef {
	wake := func(r rowDef) rowDef {
		r.path, r.body = "/hooks/wake", wakeBody
		if r.expect == 0 {
			r.expect = http.StatusOK
		}
		return r
	}
	return []rowDef{
		wake(rowDef{id: "a", title: "respond (static ceiling)", base: "a",
			site: "respond `{\"ok\":true,\"mode\":\"now\"}` 200"}),
		wake(rowDef{id: "b", title: "reverse_proxy to sink (forwarding ceiling)", base: "b", sinkBound: true,
			site: "reverse_proxy unix/{sink}"}),
		wake(rowDef{id: "c", title: "hooks wake, sync", base: "b", target: 1.0, sinkBound: true,
			site: hooksSite("")}),
		{id: "d", title: "hooks agent + policy", base: "b", target: 0.9, sinkBound: true,
			site: hooksSite(policyLines), path: "/hooks/agent", body: agentBody, expect: http.StatusOK},
		wake(rowDef{id: "e", title: "401 flood, many addresses", base: "a", target: 0.9,
			site: hooksSite(""), badToken: true, source: srcSpread, expect: http.StatusUnauthorized}),
		wake(rowDef{id: "f", title: "429 flood, locked address", base: "a", target: 0.9,
			site: hooksSite(""), badToken: true, source: srcLocked, expect: http.StatusTooManyRequests}),
		{id: "g", title: "mapping: templates + CEL match", base: "b", target: 0.8, sinkBound: true, probe: true,
			site: hooksSite(mappingLines), path: "/hooks/github", body: githubBody, expect: http.StatusOK},
		{id: "h", title: "mapping: TS transform", base: "b", target: 0.5, sinkBound: true, probe: true,
			site: hooksSite(transformLines), path: "/hooks/github-ts", body: githubBody, expect: http.StatusOK},
		wake(rowDef{id: "i", title: "spool (durable accept)", base: "c", target: 0.5, maxP99: 25 * time.Millisecond, probe: true, sinkBound: true,
			site: hooksSite(spoolLines)}),
		wake(rowDef{id: "j", title: "respond, with (e)'s connection churn", base: "a",
			site: "respond `{\"ok\":true,\"mode\":\"now\"}` 200", source: srcSpread, bindOnly: true}),
		wake(rowDef{id: "k", title: "hooks wake, forward mode", base: "c", target: 1.0, sinkBound: true, probe: true,
			site: hooksSite("mode forward")}),
		wake(rowDef{id: "l", title: "spool cluster, 1-node NATS", base: "i", target: 0.5, maxP99: 25 * time.Millisecond, probe: true, sinkBound: true,
			nats: 1, site: hooksSite(clusterSpoolLines("l", 1))}),
		wake(rowDef{id: "m", title: "spool cluster, 3-node NATS (R3)", base: "i", target: 0.5, maxP99: 25 * time.Millisecond, probe: true, sinkBound: true,
			nats: 3, site: hooksSite(clusterSpoolLines("m", 3))}),
		wake(rowDef{id: "n", title: "401 flood, many addresses, cluster on", base: "e", target: 0.9, probe: true,
			nats: 1, site: hooksSite(clusterLines("n", 1)), badToken: true, source: srcSpread, expect: http.StatusUnauthorized}),
		wake(rowDef{id: "o", title: "429 flood, locked address, cluster on", base: "f", target: 0.9, probe: true,
			nats: 1, site: hooksSite(clusterLines("o", 1)), badToken: true, source: srcLocked, expect: http.StatusTooManyRequests}),
		wake(rowDef{id: "p", title: "(m) with NATS sync_interval always", base: "m", probe: true, sinkBound: true,
			nats: 3, natsAlways: true, site: hooksSite(clusterSpoolLinesOn("p", natsKey{3, true}))}),
		wake(rowDef{id: "q", title: "(c) with the event log off", base: "b", sinkBound: true, probe: true,
			site: hooksSite("events off"), twinOf: "c", twinTarget: 0.95}),
		wake(rowDef{id: "r", title: "(e) with the event log off", base: "a", probe: true,
			site: hooksSite("events off"), badToken: true, source: srcSpread, expect: http.StatusUnauthorized, twinOf: "e", twinTarget: 0.95}),
		{id: "s", title: "mapping, GitHub-signed (HMAC-SHA256)", base: "c", sinkBound: true, probe: true, signed: "github",
			site: hooksSite(signedMapping("github-signed", "github", "secret {github_secret}")), path: "/hooks/github-signed", body: githubBody, expect: http.StatusOK},
		{id: "t", title: "mapping, Discord-signed (Ed25519)", base: "c", sinkBound: true, probe: true, signed: "discord", costTarget: 0.10,
			site: hooksSite(signedMapping("discord-signed", "discord", "public_key {discord_key}\n\t\t\t\ttolerance 1h")), path: "/hooks/discord-signed", body: discordBody, expect: http.StatusOK},
		{id: "u", title: "mapping, SendGrid-signed (ECDSA P-256)", base: "c", sinkBound: true, probe: true, signed: "sendgrid", costTarget: 0.10,
			site: hooksSite(signedMapping("sendgrid-signed", "sendgrid", "public_key {sendgrid_key}\n\t\t\t\ttolerance 1h")), path: "/hooks/sendgrid-signed", body: sendgridBody, expect: http.StatusOK},
		{id: "v", title: "(s) with the hook token, no verify", base: "c", sinkBound: true, probe: true, signed: "token",
			site: hooksSite(signedMapping("github-token", "", "")), path: "/hooks/github-token", body: githubBody, expect: http.StatusOK},
		watchedRow(wake(rowDef{id: "w", title: "(l) with a console and a cluster tail", base: "l", target: 0.95, probe: true,
			sinkBound: true, nats: 1, site: hooksSite(clusterSpoolLines("w", 1))})),
	}
}

// watchedRow makes r a watched row on its own base path (watchedPath), so
// that the admin API selects its handler.
func watchedRow(r rowDef) rowDef {
	r.watched = true
	r.path = watchedPath + strings.TrimPrefix(r.path, "/hooks")
	r.site = strings.Replace(r.site, "hooks {", "hooks "+watchedPath+" {", 1)
	return r
}

// selectRows returns the catalogue rows named in list ("a,c,e"; "" or
// "all" = every row), in catalogue order.
func selectRows(list string) ([]rowDef, error) {
	all := rowCatalogue()
	if list == "" || list == "all" {
		return all, nil
	}
	want := map[string]bool{}
	for id := range strings.SplitSeq(list, ",") {
		id = strings.TrimSpace(id)
		if _, ok := findRow(all, id); !ok {
			return nil, fmt.Errorf("-rows: unknown row %q (known: a to %s)", id, all[len(all)-1].id)
		}
		want[id] = true
	}
	var out []rowDef
	for _, r := range all {
		if want[r.id] {
			out = append(out, r)
		}
	}
	return out, nil
}

// findRow returns the row with id.
func findRow(rows []rowDef, id string) (rowDef, bool) {
	for _, r := range rows {
		if r.id == id {
			return r, true
		}
	}
	return rowDef{}, false
}

// buildRequest serialises the row's request for host. With forwarded set
// it adds an X-Forwarded-For header of forwardedWidth bytes and returns
// the offset of its value.
func buildRequest(r rowDef, host, token string, forwarded bool) (req []byte, xffAt int) {
	return buildRequestWith(r, host, token, forwarded, "")
}

// closingRequest is the row's request asking the server to close the
// connection after answering.
func closingRequest(r rowDef, host, token string) []byte {
	req, _ := buildRequestWith(r, host, token, false, "Connection: close\r\n")
	return req
}

// buildRequestWith is buildRequest with extra header lines.
func buildRequestWith(r rowDef, host, token string, forwarded bool, extra string) (req []byte, xffAt int) {
	b := make([]byte, 0, 256+len(r.body))
	b = append(b, "POST "+r.path+" HTTP/1.1\r\nHost: "+host+"\r\n"+extra...)
	b = append(b, "Authorization: Bearer "+token+"\r\n"...)
	b = append(b, "Content-Type: application/json\r\n"...)
	if forwarded {
		b = append(b, "X-Forwarded-For: "...)
		xffAt = len(b)
		b = append(b, strings.Repeat("0", forwardedWidth)+"\r\n"...)
		putForwarded(b[xffAt:xffAt+forwardedWidth], 0)
	}
	b = append(b, "Content-Length: "+strconv.Itoa(len(r.body))+"\r\n\r\n"...)
	return append(b, r.body...), xffAt
}

// wrongToken returns a token of the same length as tok that differs in
// every position.
func wrongToken(tok string) string {
	b := []byte(tok)
	for i, c := range b {
		if c == 'x' {
			b[i] = 'y'
		} else {
			b[i] = 'x'
		}
	}
	return string(b)
}
