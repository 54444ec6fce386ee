//go:build openclaw

package e2e

import (
	"net/http"
	"strings"
)

// nonceMark in a case's path, query, headers or body is replaced by a
// fresh nonce per send, so that the two sides never share a replay key or
// a coalesced wake, and every prompt can be traced back to its send.
const nonceMark = "@N@"

// Credentials a send presents: names of credHeaders.
const (
	credBearer   = ""           // Authorization: Bearer <the target's token>
	credNone     = "none"       // no credentials
	credWrong    = "wrong"      // Authorization: Bearer <a wrong token>
	credOpenclaw = "x-openclaw" // x-openclaw-token: <the target's token>
	// x-openclaw-token: <the target's token> and x-service-token: <a wrong one>
	credOpenclawWrongService = "x-openclaw+wrong-service"
	// x-openclaw-token twice: <the target's token>, then <a wrong one>
	credOpenclawTwice = "x-openclaw-twice"
)

// credHeaders are the token headers of each credential, in the order
// sent: credValid stands for the target's token, credBad for a wrong one.
// The token header table of issue 35 (Build 5) is every entry sent to
// the gateway and to the edge.
var credHeaders = map[string][][2]string{
	credBearer:                          {{"Authorization", "Bearer " + credValid}},
	credNone:                            nil,
	credWrong:                           {{"Authorization", "Bearer " + credBad}},
	credOpenclaw:                        {{"X-OpenClaw-Token", credValid}},
	credOpenclawWrongService:            {{"X-OpenClaw-Token", credValid}, {"X-Service-Token", credBad}},
	credOpenclawTwice:                   {{"X-OpenClaw-Token", credValid}, {"X-OpenClaw-Token", credBad}},
	"x-openclaw twice, wrong first":     {{"X-OpenClaw-Token", credBad}, {"X-OpenClaw-Token", credValid}},
	"x-openclaw twice, both valid":      {{"X-OpenClaw-Token", credValid}, {"X-OpenClaw-Token", credValid}},
	"bearer and x-openclaw, both valid": {{"Authorization", "Bearer " + credValid}, {"X-OpenClaw-Token", credValid}},
	"valid bearer, wrong x-openclaw":    {{"Authorization", "Bearer " + credValid}, {"X-OpenClaw-Token", credBad}},
	"wrong bearer, valid x-openclaw":    {{"Authorization", "Bearer " + credBad}, {"X-OpenClaw-Token", credValid}},
	"bearer twice, valid and wrong":     {{"Authorization", "Bearer " + credValid}, {"Authorization", "Bearer " + credBad}},
	"bearer twice, wrong and valid":     {{"Authorization", "Bearer " + credBad}, {"Authorization", "Bearer " + credValid}},
	"empty bearer, valid x-openclaw":    {{"Authorization", "Bearer "}, {"X-OpenClaw-Token", credValid}},
}

// Placeholders of credHeaders' values.
const (
	credValid = "@TOKEN@"
	credBad   = "@WRONG@"
)

// diffSend is one request of a case, sent alike to the gateway and to
// the edge.
type diffSend struct {
	method      string            // default POST
	sub         string            // path under the hooks base, with query
	body        string            // raw body; nonceMark is replaced
	contentType string            // default application/json; "-" sends none
	headers     map[string]string // extra headers; nonceMark is replaced
	cred        string            // one of the cred* values
	source      string            // client address (default 127.0.0.1)
	repeat      int               // send it this many times (default 1)
	raw         bool              // send the path's bytes as they are (no percent-encoding, a '#' included)
	host        string            // the Host header (default the target's address)
	chunked     bool              // send the body chunked (no Content-Length)
}

// diffCase is one differential case: its sends and what it covers.
type diffCase struct {
	name  string
	sends []diffSend
	// allPaths: sent through every dispatch path of the edge (sync, a
	// local spool, spool cluster), not only the sync one (issue 35)
	allPaths bool
}

// allPaths marks cases to send through every dispatch path.
func allPaths(cs ...diffCase) []diffCase {
	for i := range cs {
		cs[i].allPaths = true
	}
	return cs
}

// one is a case of a single POST with a JSON body.
func one(name, sub, body string, opts ...func(*diffSend)) diffCase {
	s := diffSend{sub: sub, body: body}
	for _, o := range opts {
		o(&s)
	}
	return diffCase{name: name, sends: []diffSend{s}}
}

// twice is a case of the same POST sent twice (replays, coalescing).
func twice(name, sub, body string, opts ...func(*diffSend)) diffCase {
	c := one(name, sub, body, opts...)
	c.sends[0].repeat = 2
	return c
}

func withHeader(k, v string) func(*diffSend) {
	return func(s *diffSend) {
		if s.headers == nil {
			s.headers = map[string]string{}
		}
		s.headers[k] = v
	}
}
func withCred(c string) func(*diffSend)      { return func(s *diffSend) { s.cred = c } }
func withType(ct string) func(*diffSend)     { return func(s *diffSend) { s.contentType = ct } }
func withMethod(m string) func(*diffSend)    { return func(s *diffSend) { s.method = m } }
func withSource(addr string) func(*diffSend) { return func(s *diffSend) { s.source = addr } }
func withRawPath() func(*diffSend)           { return func(s *diffSend) { s.raw = true } }
func withHost(h string) func(*diffSend)      { return func(s *diffSend) { s.host = h } }
func withChunked() func(*diffSend)           { return func(s *diffSend) { s.chunked = true } }

// withHeaders sets several headers, "Name: value" each.
func withHeaders(hdr ...string) func(*diffSend) {
	return func(s *diffSend) {
		for _, h := range hdr {
			k, v, _ := strings.Cut(h, ":")
			withHeader(strings.TrimSpace(k), strings.TrimSpace(v))(s)
		}
	}
}

// traceParent is a well-formed W3C traceparent.
const traceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// gmailBody is a Gmail push with n messages whose ids carry the nonce.
func gmailBody(n int) string {
	msgs := make([]string, n)
	for i := range msgs {
		id := "@N@-" + string(rune('a'+i))
		msgs[i] = `{"id":"` + id + `","from":"sender` + string(rune('a'+i)) + `@example.com","subject":"Subject ` + id + `","snippet":"snippet","body":"Body of ` + id + `"}`
	}
	return `{"messages":[` + strings.Join(msgs, ",") + `]}`
}

// differentialCases are the cases of TestDifferential (at least 60).
func differentialCases() []diffCase {
	big := `{"text":"` + strings.Repeat("a", 300<<10) + `"}`
	bigGmail := `{"messages":[{"id":"@N@-big","from":"a@example.com","subject":"big","snippet":"s","body":"` + strings.Repeat("b", 400<<10) + `"}]}`
	lockout := diffCase{name: "lockout: 21 wrong tokens, then the right one"}
	for range 21 {
		lockout.sends = append(lockout.sends, diffSend{sub: "/wake", body: `{"text":"locked @N@"}`, cred: credWrong, source: "127.0.0.4"})
	}
	lockout.sends = append(lockout.sends, diffSend{sub: "/wake", body: `{"text":"right token while locked @N@"}`, source: "127.0.0.4"})
	lockedGET := diffCase{name: "lockout: 21 wrong tokens, then a GET"}
	for range 21 {
		lockedGET.sends = append(lockedGET.sends, diffSend{sub: "/wake", body: `{"text":"locked @N@"}`, cred: credWrong, source: "127.0.0.6"})
	}
	lockedGET.sends = append(lockedGET.sends, diffSend{method: http.MethodGet, sub: "/wake", source: "127.0.0.6"})
	dump := `{"nonce":"@N@"}`

	return append([]diffCase{
		// /wake
		one("wake", "/wake", `{"text":"Hello from a wake @N@"}`),
		one("wake next-heartbeat", "/wake", `{"text":"Later @N@","mode":"next-heartbeat"}`),
		one("wake empty text", "/wake", `{"text":"   "}`),
		one("wake without body", "/wake", ``),
		one("wake agentId main", "/wake", `{"text":"For main @N@","agentId":"main"}`),
		one("wake agentId unknown", "/wake", `{"text":"x @N@","agentId":"nobody"}`),
		one("wake agentId not a string", "/wake", `{"text":"x @N@","agentId":42}`),
		one("wake sessionKey", "/wake", `{"text":"Keyed wake @N@","sessionKey":"hook:wake:@N@"}`),
		one("wake sessionKey with next-heartbeat", "/wake", `{"text":"x @N@","sessionKey":"hook:wake:x","mode":"next-heartbeat"}`),
		one("wake sessionKey outside the prefixes", "/wake", `{"text":"x @N@","sessionKey":"other:1"}`),
		twice("wake twice: coalesced", "/wake", `{"text":"Same wake twice @N@"}`),
		one("wake after a UTF-8 BOM", "/wake", "\ufeff"+`{"text":"BOM @N@"}`),

		// /agent
		one("agent", "/agent", `{"message":"Agent run @N@","name":"Custom Name","agentId":"main","sessionKey":"hook:agent:@N@","wakeMode":"next-heartbeat","deliver":false}`),
		one("agent default delivery", "/agent", `{"message":"Deliver by default @N@"}`),
		one("agent channel last with to", "/agent", `{"message":"x @N@","channel":"last","to":"123"}`),
		one("agent to without channel", "/agent", `{"message":"x @N@","to":"123"}`),
		one("agent unknown channel", "/agent", `{"message":"x @N@","channel":"telegram","to":"123"}`),
		one("agent channel ignored without delivery", "/agent", `{"message":"No delivery @N@","deliver":false,"channel":"bogus"}`),
		one("agent empty to", "/agent", `{"message":"x @N@","channel":"last","to":""}`),
		one("agent accountId without channel", "/agent", `{"message":"x @N@","accountId":"acc"}`),
		one("agent model and thinking", "/agent", `{"message":"Think @N@","model":"stub/m2","thinking":"high","deliver":false}`),
		one("agent model alias", "/agent", `{"message":"Alias @N@","model":"m2","deliver":false}`),
		one("agent empty model", "/agent", `{"message":"x @N@","model":""}`),
		one("agent unknown model", "/agent", `{"message":"Unknown model @N@","model":"nope/x","deliver":false}`),
		one("agent agentId unknown", "/agent", `{"message":"x @N@","agentId":"nobody"}`),
		one("agent agentId empty", "/agent", `{"message":"x @N@","agentId":""}`),
		one("agent sessionKey outside the prefixes", "/agent", `{"message":"x @N@","sessionKey":"other:1"}`),
		one("agent persistent session", "/agent", `{"message":"Persistent run @N@","sessionKey":"hook:persist:@N@","sessionMode":"persistent","deliver":false}`),
		one("agent persistent without key", "/agent", `{"message":"x @N@","sessionMode":"persistent"}`),
		one("agent bad sessionMode", "/agent", `{"message":"x @N@","sessionMode":"forever"}`),
		one("agent timeoutSeconds", "/agent", `{"message":"`+slowMarker+` @N@","timeoutSeconds":2,"deliver":false}`),
		one("agent without message", "/agent", `{"name":"x"}`),
		one("agent waitForCompletion", "/agent", `{"message":"Wait for me @N@","waitForCompletion":true,"deliver":false}`),
		one("agent waitForCompletion not boolean", "/agent", `{"message":"x @N@","waitForCompletion":"yes"}`),
		twice("agent Idempotency-Key replay", "/agent", `{"message":"Replay me @N@","deliver":false}`, withHeader("Idempotency-Key", "key-@N@")),
		twice("agent x-openclaw-idempotency-key replay", "/agent", `{"message":"Replay alias @N@","deliver":false}`, withHeader("X-OpenClaw-Idempotency-Key", "alias-@N@")),
		twice("agent body idempotencyKey padded", "/agent", `{"message":"Body key @N@","idempotencyKey":"  body-@N@  ","deliver":false}`),
		twice("agent Idempotency-Key over 256 chars", "/agent", `{"message":"Long key @N@","deliver":false}`, withHeader("Idempotency-Key", strings.Repeat("k", 300)+"@N@")),

		// mapped hooks
		one("github mapping", "/github", `{"nonce":"@N@","repository":{"full_name":"octo/api"},"sender":{"login":"mona"}}`, withHeader("X-GitHub-Event", "push")),
		one("alert wake mapping", "/alert?sev=high", `{"nonce":"@N@","alert":{"name":"DiskFull"}}`),
		one("nightly next-heartbeat mapping", "/nightly", `{"nonce":"@N@"}`),
		one("ops mapping", "/ops", `{"nonce":"@N@","msg":"restart api"}`),
		one("notify: channel last with templated to", "/notify", `{"nonce":"@N@","msg":"hi","to":"+15550001"}`),
		one("notify without to", "/notify", `{"nonce":"@N@","msg":"no target"}`),
		one("default delivery mapping", "/default", `{"nonce":"@N@"}`),
		one("to-only mapping", "/toonly", `{"nonce":"@N@"}`),
		one("slow mapping (timeoutSeconds)", "/slow", `{"nonce":"@N@"}`),
		one("unsafe mapping", "/unsafe", `{"nonce":"@N@","msg":"from a trusted sender"}`),
		one("batch fan-out", "/batch", `{"nonce":"@N@","items":[{"id":"@N@-1"},{"id":"@N@-2"}]}`),
		one("batch empty", "/batch", `{"nonce":"@N@","items":[]}`),
		one("source alpha", "/src", `{"nonce":"@N@","source":"alpha"}`),
		one("source mismatch", "/src", `{"nonce":"@N@","source":"gamma"}`),
		one("source beta on any path", "/anything-goes", `{"nonce":"@N@","source":"beta"}`),
		one("transform export", "/tx?q=find", `{"nonce":"@N@","title":"Quarterly"}`),
		one("transform returns null", "/tx", `{"nonce":"@N@","skip":true}`),
		one("transform throws", "/tx", `{"nonce":"@N@","boom":true}`),
		one("transform override types", "/tx", `{"nonce":"@N@","badTypes":true}`),
		one("transform returns undefined", "/undef", `{"nonce":"@N@"}`),
		one("templated model and thinking", "/model", `{"nonce":"@N@","model":"stub/m2","thinking":"low"}`),
		one("query and header templates", "/qh?kind=build&token_type=x", `{"nonce":"@N@"}`, withHeader("X-Kind", "ci")),
		one("templated session key rendered empty", "/keyed", `{"nonce":"@N@"}`),
		one("templated session key", "/keyed", `{"nonce":"@N@","key":"hook:keyed:@N@"}`),
		one("persistent mapping", "/persist", `{"nonce":"@N@"}`),
		one("non-ASCII match.path", "/caf%C3%A9", `{"nonce":"@N@"}`),
		one("gmail preset fan-out", "/gmail", gmailBody(2)),
		one("gmail preset no messages", "/gmail", `{"messages":[]}`),
		one("gmail above the normal body limit", "/gmail", bigGmail),

		// authentication and protocol
		one("x-openclaw-token header", "/wake", `{"text":"Header token @N@"}`, withCred(credOpenclaw)),
		one("no credentials", "/wake", `{"text":"x @N@"}`, withCred(credNone), withSource("127.0.0.5")),
		one("wrong token", "/wake", `{"text":"x @N@"}`, withCred(credWrong), withSource("127.0.0.5")),
		one("token in the query", "/wake?token=abc", `{"text":"x @N@"}`),
		one("GET", "/wake", ``, withMethod(http.MethodGet)),
		one("unknown hook", "/nothing-here", `{"nonce":"@N@"}`),
		one("no hook name", "/", `{}`),
		one("invalid JSON", "/wake", `{"text":`),
		one("JSON array body", "/wake", `["text"]`),
		one("body too large", "/wake", big),
		one("content type text/plain", "/wake", `{"text":"Plain text type @N@"}`, withType("text/plain")),
		one("sender X-Forwarded-For", "/wake", `{"text":"Forwarded @N@"}`, withHeader("X-Forwarded-For", "203.0.113.9")),
		lockout,

		// forward mode: what the gateway's mapping sees of a request (the
		// dump mapping's transform renders path, query and every header)
		one("dump: plain request", "/dump", dump),
		one("dump: query with credential-like names", "/dump?key=k1&auth=a1&sig=s1&signature=s2&password=p1&access_token=t1&myToken=t2&apiKey=x&q=@N@", dump),
		one("dump: escaped query and repeated names", "/dump?q=a%20b&q=%E2%9C%93&e=&plus=a+b", dump),
		one("dump: no User-Agent", "/dump", dump, withHeader("User-Agent", "")),
		one("dump: provider headers", "/dump", dump, withHeaders("User-Agent: GitHub-Hookshot/abc", "X-GitHub-Event: push",
			"X-GitHub-Delivery: d-@N@", "X-Event-Key: repo:push", "Webhook-Id: msg_@N@", "X-Request-Id: r-@N@", "Accept: */*")),
		one("dump: Idempotency-Key", "/dump", dump, withHeader("Idempotency-Key", "idem-@N@")),
		one("dump: X-OpenClaw-Idempotency-Key", "/dump", dump, withHeader("X-OpenClaw-Idempotency-Key", "oc-@N@")),
		one("dump: well-formed trace context", "/dump", dump, withHeaders("Traceparent: "+traceParent, "Tracestate: vendor=a,other=b")),
		one("dump: credential headers", "/dump", dump, withHeaders("X-Api-Key: ak-@N@", "Cookie: sid=@N@", "X-Auth-Token: at-@N@",
			"X-Gitlab-Token: gt-@N@", "X-Hub-Signature-256: sha256=00")),
		one("dump: x-openclaw-token header", "/dump", dump, withCred(credOpenclaw)),
		one("dump: client-address and override headers", "/dump", dump, withHeaders("True-Client-IP: 203.0.113.1",
			"CF-Connecting-IP: 203.0.113.2", "X-Client-IP: 203.0.113.3", "Client-IP: 203.0.113.4", "Fastly-Client-IP: 203.0.113.5",
			"X-Cluster-Client-IP: 203.0.113.6", "X-Original-Forwarded-For: 203.0.113.7", "X-Forwarded: for=203.0.113.8",
			"X-Envoy-External-Address: 203.0.113.9", "X-Azure-ClientIP: 203.0.113.10", "X-HTTP-Method-Override: DELETE",
			"X-Original-URL: /admin", "X-Rewrite-URL: /admin")),
		one("dump: malformed traceparent", "/dump", dump, withHeaders("Traceparent: 00-not-a-trace", "Tracestate: vendor=a")),
		one("dump: over-long tracestate", "/dump", dump, withHeaders("Traceparent: "+traceParent, "Tracestate: vendor="+strings.Repeat("a", 10<<10))),
		one("escaped hook name, source-only mapping", "/%E2%9C%93", `{"nonce":"@N@","source":"beta"}`),
		one("escaped hook name, no mapping", "/%C3%BCber", `{"nonce":"@N@","source":"gamma"}`),
		one("non-ASCII match.path, lower-case escapes", "/caf%c3%a9", `{"nonce":"@N@"}`),
		one("raw UTF-8 request line", "/\u2713", `{"nonce":"@N@","source":"beta"}`, withRawPath()),
		one("token parameter in another case", "/wake?Token=abc", `{"text":"x @N@"}`),
		one("agent sessionKey null", "/agent", `{"message":"Null key @N@","sessionKey":null,"deliver":false}`),
		one("agent sessionKey blank", "/agent", `{"message":"Blank key @N@","sessionKey":"  ","deliver":false}`),
		lockedGET,
	}, issue35Cases()...)
}

// deepJSON is a JSON array nested n deep.
func deepJSON(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// issue35Cases are the differences of issue 35's run (D17-D33, B13 of
// issue 34), each sent through every dispatch path of the edge.
func issue35Cases() []diffCase {
	dump := `{"nonce":"@N@"}`
	hugeGmail := `{"messages":[{"id":"@N@-huge","from":"a@example.com","subject":"huge @N@","snippet":"s","body":"` +
		strings.Repeat("h", 1536<<10) + `"}]}`
	return allPaths(
		// D28: a Host the site does not name (a tunnel, a load balancer)
		one("D28 foreign Host", "/agent", `{"message":"Foreign host @N@","deliver":false}`, withHost("tunnel-@N@.example.net")),
		// D24: valid JSON beyond encoding/json's limits
		one("D24 number beyond float64", "/agent", `{"message":"Big number @N@","deliver":false,"n":1e400}`),
		one("D24 timeoutSeconds beyond float64", "/agent", `{"message":"Big timeout @N@","deliver":false,"timeoutSeconds":1e400}`),
		one("D24 nesting deeper than 10,000", "/agent", `{"message":"Deep @N@","deliver":false,"deep":`+deepJSON(12000)+`}`),
		one("D24 unclosed deep nesting", "/agent", `{"message":"x @N@","deep":`+deepJSON(12000)[:24000-1]+`}`),
		// D29: a body over NATS's max_payload (1 MiB), within the gmail allowance
		one("D29 gmail body over 1 MiB", "/gmail", hugeGmail),
		// D32/D33: several token headers
		one("D32 valid x-openclaw-token, wrong x-service-token", "/agent", `{"message":"Two headers @N@","deliver":false}`,
			withCred(credOpenclawWrongService), withSource("127.0.0.7")),
		one("D33 two x-openclaw-token headers, valid and wrong", "/agent", `{"message":"Two tokens @N@","deliver":false}`,
			withCred(credOpenclawTwice), withSource("127.0.0.8")),
		// the rest of the token header table (Build 5), from one address
		// of its own (five refusals, under the gateway's lockout)
		tokenCase("x-openclaw twice, wrong first"),
		tokenCase("x-openclaw twice, both valid"),
		tokenCase("bearer and x-openclaw, both valid"),
		tokenCase("valid bearer, wrong x-openclaw"),
		tokenCase("wrong bearer, valid x-openclaw"),
		tokenCase("bearer twice, valid and wrong"),
		tokenCase("bearer twice, wrong and valid"),
		tokenCase("empty bearer, valid x-openclaw"),
		// D30 and B13: the forward header rule, both ways
		one("D30 ordinary vendor headers", "/dump", dump, withHeaders("X-GitHub-Enterprise-Host: ghe.example.com",
			"X-Author: mona", "X-Payment-Method: card", "I-Twilio-Idempotency-Token: tw-@N@", "X-Signature-Timestamp: 1700000000",
			"X-Correlation-Key: corr-@N@", "X-Ip-Country: NL", "X-Remote-Branch: main", "X-Original-Sender: alerts@example.com")),
		one("B13 identity headers", "/dump", dump, withHeaders("Client-Cert: :MIIB:", "X-Arr-Clientcert: MIIC",
			"X-Vouch-User: mallory@example.com", "X-Consumer-Username: admin", "X-Otp: 123456", "X-Remote-User: admin")),
		// D25/D26/D27: names the gateway's URL parser reads otherwise than Go's
		one("D25 raw #fragment", "/wake#frag", `{"text":"Fragment @N@"}`, withRawPath()),
		one("D26 backslash", `\agent`, `{"message":"Backslash @N@","deliver":false}`, withRawPath()),
		one("D27 match.path a%2Fb", "/a%2Fb", `{"nonce":"@N@"}`),
		// D18: bodies framed as the sender framed them
		one("D18 empty body, Content-Length: 0", "/dump", ``),
		one("D18 chunked body", "/dump", dump, withChunked()),
		// D17: an edge-decided refusal in the gateway's words (extra is an
		// agent of the gateway's that hooks.allowedAgentIds leaves out)
		one("D17 agentId outside allowedAgentIds", "/agent", `{"message":"x @N@","agentId":"extra"}`),
		one("D17 wake agentId outside allowedAgentIds", "/wake", `{"text":"x @N@","agentId":"extra"}`),
	)
}

// tokenCase is a case of the token header table: an agent run presenting
// the credential cred (a name of credHeaders), named "tokens: <cred>".
func tokenCase(cred string) diffCase {
	return one("tokens: "+cred, "/agent", `{"message":"Tokens @N@","deliver":false}`, withCred(cred), withSource("127.0.0.9"))
}
