package caddyhook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyhook/caddyhook/internal/boundary"
	"github.com/caddyhook/caddyhook/internal/devgw"
	"github.com/caddyhook/caddyhook/internal/natstest"
	"github.com/caddyhook/caddyhook/internal/testkit"
)

// The combination matrix (issue 21, Build 2): every hook kind a sender
// can send, in both modes, through every dispatch path, asserting exactly
// what the gateway (devgw, recording) receives and what the sender is
// answered.
//
//	modes:  render, forward
//	paths:  sync; spool <dir>; spool cluster on one NATS server (R1); spool
//	        cluster on a three-server JetStream cluster with replicas 3
//	        (R3); spool cluster with its NATS server down and fallback
//	        <dir> (accepted into the local fallback spool, drained into the
//	        queue when NATS is back)
//	kinds:  /wake, /agent, the gmail preset, a forward mapping, a render
//	        (template) mapping, a signed mapping (verify github), a
//	        transform mapping (a JS module); and the provider axis (issue
//	        29): one provider per scheme family, each a mapping with only
//	        its verify block (its default template in render mode, forward
//	        in forward mode): shopify (HMAC in a header), twilio (a form
//	        signed with its URL, answered with empty TwiML), clerk
//	        (Standard Webhooks), gitlab (a token), discord (Ed25519,
//	        answered with the deferred response), sendgrid (ECDSA, an
//	        array body), feishu (a digest, an encrypted body), pubsub (a
//	        JWT under a JWKS file). X.509 (sns) needs its certificate
//	        fetched from an allow-listed https host, which a Caddy config
//	        cannot point at a test server: it is tested through the
//	        handler with a stub client (handshake_test.go).
//
// Every cell applies: a forward mapping in render mode and the render,
// signed-render and transform mappings in forward mode are the mixes the
// README allows ("Both kinds of mapping may be mixed in either mode"),
// and the preset and the signed mapping forward in forward mode. The
// only cells skipped are the R3 ones under -short (the race run), said so
// in the summary the test logs.
//
// One Caddy config holds every handler (one per mode and path, each with
// every mapping, at its own base path), each path its own gateway per
// mode, at a prefix of its own (/gw/hooks, set with gateway_prefix where
// there is a gateway). The cluster paths use an edge with `deliver off`
// (no gateway, so no gateway settings) and a delivery node next to the
// gateway, in a namespace of their own, so every event crosses the queue
// codec (and, NATS down, the fallback spool's) between the node that
// accepted it and the one that sends it. A keyed request is sent twice in
// every cell: the second gets the first reply and dispatches nothing.
//
// A cell's expected gateway requests and reply are computed from the mode
// and the kind (mxWant, mxCheckReply), the same function for every path:
// the paths must not change what the gateway gets. The sync path is the
// reference, and every other path must deliver byte for byte the request
// the sync path delivered (method, target, Host, every header, body),
// except for these documented differences (mxComparable):
//
//  1. Idempotency-Key when the sender gave none the gateway reads. A
//     rendered action always carries the event id; without a sender's key
//     the id is random per request, so it differs between any two paths
//     (with one it is derived from the key and the action, and is the
//     same everywhere). A forwarded request carries the sender's key
//     headers as sent; when there are none, a spooled one gets its event
//     id as Idempotency-Key (a redelivery after a lost answer must not run
//     twice; README "Two modes"), a sync one gets none (it is sent once).
//  2. The boundary id of a wrapped message (render mode's wrap edge): a
//     fresh random id per wrap, so that content cannot forge the closing
//     marker.
//
// The sender's reply differs by design: sync passes the gateway's reply
// through (its runId, a wake's eventOutcome), a spooled accept answers
// with the event ids (`{"ok":true,"runId":<event id>}`, a wake
// `{"ok":true,"mode":…}`), which are the Idempotency-Keys the gateway
// gets when the edge chose them.

// mxKind is a hook kind of the matrix.
type mxKind int

const (
	mxWake mxKind = iota
	mxAgent
	mxPreset
	mxForwardMapping
	mxRenderMapping
	mxSignedMapping
	mxTransformMapping
	mxShopify
	mxTwilio
	mxClerk
	mxGitLab
	mxDiscord
	mxSendGrid
	mxFeishu
	mxPubSub
	mxKinds
)

// mxFirstProvider is the first kind of the provider axis.
const mxFirstProvider = mxShopify

func (k mxKind) String() string {
	if k >= mxFirstProvider {
		return "provider-" + k.provider()
	}
	return [...]string{"wake", "agent", "preset", "forward-mapping", "render-mapping", "signed-mapping", "transform-mapping"}[k]
}

// provider is a provider kind's provider (and mapping, and hook name).
func (k mxKind) provider() string {
	return [...]string{"shopify", "twilio", "clerk", "gitlab", "discord", "sendgrid", "feishu", "pubsub"}[k-mxFirstProvider]
}

// marker is a string found in every request of the kind the gateway
// receives (body or rendered message): it tells the cells of one gateway
// apart.
func (k mxKind) marker() string {
	if k >= mxFirstProvider {
		return "mx-" + k.provider()
	}
	return [...]string{"mx-wake", "mx-agent", "mx-preset", "mx-forward", "mx-render", "mx-signed", "mx-transform"}[k]
}

// mxPath is a dispatch path of the matrix.
type mxPath int

const (
	mxSync mxPath = iota
	mxSpool
	mxClusterR1
	mxClusterR3
	mxFallback
	mxPaths
)

func (p mxPath) String() string {
	return [...]string{"sync", "spool", "cluster-R1", "cluster-R3", "fallback"}[p]
}

// spooled: the reply comes before the delivery, with the event ids.
func (p mxPath) spooled() bool { return p != mxSync }

var mxModes = []string{"render", "forward"}

// Values the senders use.
const (
	mxTraceParent    = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	mxTraceState     = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	mxSessionKey     = "hook:edge"
	mxGitHubSecret   = "mx-github-secret-7c3b9d1f5e2a4680"
	mxGitHubDelivery = "5f2c1a8e-0b3d-11f1-9a7e-3c9d7e1f2a4b"
	mxUserAgent      = "matrix-sender/1.0"
	// mxEdgeUserAgent is what the edge's HTTP client sends with a rendered
	// action (Go's default; the action is the edge's request, not the
	// sender's).
	mxEdgeUserAgent = "Go-http-client/1.1"
	// mxClientIP is the client address the gateway is told
	// (gateway_forward_client_ip): the test's loopback connection, never
	// the sender's X-Forwarded-For.
	mxClientIP = "127.0.0.1"
	// mxGatewayPrefix is the gateways' hooks path (not the default).
	mxGatewayPrefix = "/gw/hooks"
)

// mxTransform is the transform mapping's module.
const mxTransform = `export default (ctx) => ({
  name: "Transform",
  message: "order " + ctx.payload.order.id + " " + ctx.payload.order.status +
    " (" + ctx.headers["x-matrix-probe"] + ", " + ctx.url.searchParams.get("env") + ")",
});
`

// mxHooks are the hooks lines every handler of a mode has: the policy,
// the gmail preset and one mapping of each kind. The signed mapping
// forwards in forward mode and renders its template in render mode; the
// forward mapping forwards and the render and transform mappings render
// in either mode (both kinds may be mixed in either mode). A provider
// mapping has its verify block only (its provider's default template),
// and forward in forward mode. jwks is the pubsub mapping's key set.
func mxHooks(mode, transformsRoot, jwks string) string {
	signed := `name GitHub
			message_template "PR #{{payload.number}} {{payload.action}}: {{pull_request.title}}"`
	fwd := ""
	if mode == "forward" {
		signed, fwd = "forward", "\n\t\t\tforward"
	}
	var providers strings.Builder
	for k := mxFirstProvider; k < mxKinds; k++ {
		fmt.Fprintf(&providers, "\n\t\tmapping %[1]s {\n\t\t\tmatch_path %[1]s\n\t\t\tverify %[1]s {\n\t\t\t\t%[2]s\n\t\t\t}%[3]s\n\t\t}",
			k.provider(), strings.ReplaceAll(mxProviderFor(k).verify, "@JWKS@", jwks), fwd)
	}
	return `mode ` + mode + `
		agents main
		default_session_key ` + mxSessionKey + `
		allow_request_session_key
		allowed_session_key_prefixes hook:
		idempotency_headers x-openclaw-idempotency-key
		transforms_root ` + transformsRoot + `
		presets gmail
		mapping ci {
			match_path ci
			forward
		}
		mapping deploy {
			match_path deploy
			name Deploy
			message_template "Deploy {{payload.service}} {{payload.status}} env={{query.env}} by {{headers.x-actor}}"
		}
		mapping github {
			match_path github
			verify github {
				secret {env.CH_MX_GITHUB_SECRET}
			}
			` + signed + `
		}
		mapping transformed {
			match_path transformed
			transform matrix.js
		}` + providers.String()
}

// mxHeader is one header a sender sends, and whether the forward-mode
// header rule lets it cross (forward_headers.go; the trace context is
// re-sent by the edge from what it read, so it is not listed here).
type mxHeader struct {
	name, value string
	crosses     bool
}

// mxRequest is what a sender sends for a kind (below the base path).
type mxRequest struct {
	target string // path and query below the base
	header []mxHeader
	body   string
	// keyed: the request carries an idempotency key (a header, the
	// body's idempotencyKey or a signed provider's delivery id), so
	// its event ids are the same on every path.
	keyed bool
	// gatewayKey: the request carries a key the gateway itself reads
	// (Idempotency-Key, X-OpenClaw-Idempotency-Key, idempotencyKey).
	gatewayKey bool
}

// mxSignedAt is when the matrix's providers sign (set when the test
// starts): one time for every request, so that the timestamp headers
// that cross to the gateway are the same on every path.
var mxSignedAt time.Time

// Provider secrets and settings of the matrix.
const (
	mxShopifySecret = "mx-shopify-secret-5e7a9c1b3d2f4e60"
	mxTwilioSecret  = "mx-twilio-auth-token-8c0e2a4b6d8f0a1c"
	mxGitLabSecret  = "mx-gitlab-token-3b5d7f9a1c2e4f6b"
	mxFeishuToken   = "mx-feishu-verification-token-7a9c"
	mxFeishuKey     = "mx-feishu-encrypt-key-1d3f5b7a9c0e"
	mxPubSubAud     = "https://hooks.example.com/pubsub"
	mxPubSubAccount = "push@mx-project.iam.gserviceaccount.com"
)

// mxProvider is one provider kind: its verify block, what it sends and
// what it stands for.
type mxProvider struct {
	verify      string // the verify block's lines (@JWKS@: the key set file)
	contentType string
	body        string
	header      []mxHeader // besides the common ones; credentials never cross
	// signURL signs a request with the URL it is sent to (Twilio).
	signURL func(url, body string) []mxHeader
	message string // what its default template renders
	// forwarded is the JSON the gateway gets in forward mode when it is
	// not the body (a form's fields, an array wrapped, a decrypted event).
	forwarded string
	// ack is the provider's acknowledgement the sender gets instead of
	// the edge's reply ("" = the edge's reply).
	ack, ackType string
}

// mxTwilioForm is the Twilio kind's form, in order, and the JSON it
// stands for.
const (
	mxTwilioForm = "MessageSid=SMmx0001&SmsStatus=received&From=%2B15551230001&To=%2B15559870002&Body=mx-twilio+hello+agent"
	mxTwilioJSON = `{"MessageSid":"SMmx0001","SmsStatus":"received","From":"+15551230001","To":"+15559870002","Body":"mx-twilio hello agent"}`
	// mxFeishuEvent is the Feishu kind's event before its encryption
	mxFeishuEvent = `{"schema":"2.0","header":{"event_id":"mx-ev-0001","event_type":"im.message.receive_v1","token":"` + mxFeishuToken +
		`"},"event":{"sender":{"sender_id":{"open_id":"ou_mx"}},"message":{"content":"mx-feishu hi"}}}`
	mxSendGridBody = `[{"email":"mx-sendgrid@example.com","event":"bounce","reason":"mailbox full","sg_event_id":"sg-mx-1"}]`
)

// mxFeishuBody is the Feishu kind's body: mxFeishuEvent encrypted once
// (the encryption takes a random IV: every request of the test sends
// these bytes).
var mxFeishuBody = sync.OnceValue(func() string { return feishuBody(mxFeishuKey, mxFeishuEvent) })

// mxProviderFor describes provider kind k.
func mxProviderFor(k mxKind) mxProvider {
	ctJSON := "application/json"
	switch k {
	case mxShopify:
		body := `{"id":4101,"name":"#mx-shopify-1001","email":"ann@example.com","total_price":"12.00","currency":"EUR"}`
		return mxProvider{verify: "secret {env.CH_MX_SHOPIFY}", contentType: ctJSON, body: body,
			header:  mxHeaders(shopifyHeaders(mxShopifySecret, body, "orders/create", "0b2c6f1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b")),
			message: "Shopify orders/create from shop.myshopify.com: order #mx-shopify-1001 12.00 EUR by ann@example.com"}
	case mxTwilio:
		return mxProvider{verify: "secret {env.CH_MX_TWILIO}", contentType: "application/x-www-form-urlencoded", body: mxTwilioForm,
			signURL: func(url, body string) []mxHeader { return mxHeaders(twilioHeaders(mxTwilioSecret, url, body)[:1]) },
			message: "Twilio message.received from +15551230001 to +15559870002: mx-twilio hello agent", forwarded: mxTwilioJSON,
			ack: `<?xml version="1.0" encoding="UTF-8"?><Response></Response>`, ackType: "text/xml"}
	case mxClerk:
		body := `{"type":"user.created","data":{"id":"user_mx-clerk","email_addresses":[{"email_address":"ann@example.com"}]}}`
		return mxProvider{verify: "secret " + pvClerkSecret, contentType: ctJSON, body: body,
			header:  mxHeaders(clerkHeaders(pvClerkKey, "msg_mx_clerk_1", body, mxSignedAt)),
			message: "Clerk user.created: user_mx-clerk ann@example.com"}
	case mxGitLab:
		body := `{"object_kind":"push","project":{"path_with_namespace":"mx-gitlab/app"},"user_username":"ann"}`
		return mxProvider{verify: "secret {env.CH_MX_GITLAB}", contentType: ctJSON, body: body,
			header:  append(mxHeaders(gitlabHeaders(mxGitLabSecret, "Push Hook")), mxHeader{"X-Gitlab-Event-Uuid", "7d1f3b5a-9c0e-4a2b-8d6f-1e3a5c7b9d0f", true}),
			message: "GitLab Push Hook on mx-gitlab/app by ann"}
	case mxDiscord:
		body := `{"id":"mx-interaction-1","type":2,"data":{"name":"ask","options":[{"name":"q","value":"mx-discord weather"}]},"member":{"user":{"username":"ann"}}}`
		return mxProvider{verify: "public_key " + pvDiscordPublicKey(), contentType: ctJSON, body: body,
			header:  mxHeaders(discordHeaders(pvDiscordKey, body, mxSignedAt)),
			message: "Discord ask from ann: mx-discord weather", ack: `{"type":5}`, ackType: "application/json"}
	case mxSendGrid:
		return mxProvider{verify: "public_key " + pvSendGridPublicKey(), contentType: ctJSON, body: mxSendGridBody,
			header:  mxHeaders(sendgridHeaders(pvSendGridKey, mxSendGridBody, mxSignedAt)),
			message: "SendGrid bounce: mx-sendgrid@example.com mailbox full", forwarded: `{"events":` + mxSendGridBody + `}`}
	case mxFeishu:
		body := mxFeishuBody()
		return mxProvider{verify: "verify_token {env.CH_MX_FEISHU_TOKEN}\n\t\t\t\tencrypt_key {env.CH_MX_FEISHU_KEY}", contentType: ctJSON, body: body,
			header:  mxHeaders(feishuHeaders(mxFeishuKey, body, mxSignedAt)),
			message: "Feishu im.message.receive_v1 from ou_mx: mx-feishu hi", forwarded: mxFeishuEvent}
	case mxPubSub:
		body := `{"message":{"attributes":{"eventType":"OBJECT_FINALIZE"},"data":"e30=","messageId":"mx-msg-0001"},"subscription":"projects/p/subscriptions/mx-pubsub"}`
		return mxProvider{verify: "audience " + mxPubSubAud + "\n\t\t\t\tservice_account " + mxPubSubAccount + "\n\t\t\t\tjwks @JWKS@",
			contentType: ctJSON, body: body, header: mxHeaders(pubsubHeaders(mxPubSubAud, mxPubSubAccount, mxSignedAt)),
			message: "Pub/Sub OBJECT_FINALIZE: message mx-msg-0001 on projects/p/subscriptions/mx-pubsub"}
	}
	panic("not a provider kind")
}

// mxHeaders are "Name: value" pairs as the sender's headers, each
// crossing to the gateway in forward mode as the header rule says.
func mxHeaders(pairs []string) []mxHeader {
	out := make([]mxHeader, 0, len(pairs))
	for _, p := range pairs {
		name, value, _ := strings.Cut(p, ": ")
		out = append(out, mxHeader{http.CanonicalHeaderKey(name), value, classifyHeader(name) == headerCrosses})
	}
	return out
}

// mxGmailMessages are the preset's batch.
var mxGmailMessages = []map[string]string{
	{"id": "mx-m1", "from": "alice@example.com", "subject": "mx-preset one", "snippet": "hello", "body": "first body"},
	{"id": "mx-m2", "from": "bob@example.com", "subject": "mx-preset two", "snippet": "again", "body": "second body"},
}

// mxRequestFor is the sender's request of kind k. Every request carries
// the trace context, a User-Agent, a probe header, a spoofed
// X-Forwarded-For and a cookie; every one but the signed one the hook
// token.
func mxRequestFor(k mxKind) mxRequest {
	contentType := "application/json"
	if k >= mxFirstProvider {
		contentType = mxProviderFor(k).contentType
	}
	common := []mxHeader{
		{"Content-Type", contentType, true},
		{"User-Agent", mxUserAgent, true},
		{"X-Matrix-Probe", "probe-" + k.String(), true},
		{"X-Forwarded-For", "198.51.100.7", false}, // forwarding: never crosses
		{"Cookie", "session=mx", false},            // credential: never crosses
		{"Traceparent", mxTraceParent, false},      // re-sent by the edge
		{"Tracestate", mxTraceState, false},
	}
	token := mxHeader{"Authorization", "Bearer " + itHookToken, false} // credential: the gateway gets the edge's
	r := mxRequest{}
	switch k {
	case mxWake:
		r.target, r.body = "/wake?src=mx", `{"text":"mx-wake: deploy finished","mode":"now"}`
		r.header = append(common, token)
	case mxAgent:
		r.target, r.body = "/agent", `{"message":"mx-agent: summarise build 42","name":"CI","deliver":false}`
		r.header = append(common, token, mxHeader{"Idempotency-Key", "mx-key-agent", true})
		r.keyed, r.gatewayKey = true, true
	case mxPreset:
		b, _ := json.Marshal(map[string]any{"messages": mxGmailMessages})
		r.target, r.body = "/gmail?account=ops", string(b)
		r.header = append(common, token, mxHeader{"X-Openclaw-Idempotency-Key", "mx-key-preset", true})
		r.keyed, r.gatewayKey = true, true
	case mxForwardMapping:
		// a byte order mark, white space and a "message" member: the
		// body is the sender's, never read as an agent run
		r.target, r.body = "/ci?pipeline=42&q=a%20b", "\uFEFF{\"pipeline\":42,\"status\":\"mx-forward failed\",\"message\":\"not a run\"}\n"
		r.header = append(common, token, mxHeader{"X-Ci-Event", "pipeline", true})
	case mxRenderMapping:
		r.target, r.body = "/deploy?env=prod", `{"service":"mx-render-api","status":"ok"}`
		r.header = append(common, token, mxHeader{"X-Actor", "alice", true}, mxHeader{"Idempotency-Key", "mx-key-render", true})
		r.keyed, r.gatewayKey = true, true
	case mxSignedMapping:
		r.target = "/github"
		r.body = `{"action":"opened","number":7,"pull_request":{"title":"mx-signed feature"},"repository":{"full_name":"octo/repo"}}`
		sig := "sha256=" + hex.EncodeToString(macOf(sha256.New, []byte(mxGitHubSecret), r.body))
		r.header = append(common,
			mxHeader{"X-Hub-Signature-256", sig, false}, // signature: never crosses
			mxHeader{"X-Github-Event", "pull_request", true},
			mxHeader{"X-Github-Delivery", mxGitHubDelivery, true})
		r.keyed = true // the delivery id is the key at the edge; the gateway reads none
	case mxTransformMapping:
		r.target, r.body = "/transformed?env=stage", `{"order":{"id":"mx-transform-9","status":"paid"},"idempotencyKey":"mx-key-transform"}`
		r.header = append(common, token)
		r.keyed, r.gatewayKey = true, true
	default:
		// signed as the provider signs (a URL-signing one when it is sent,
		// see mxSign); the provider's delivery id is the key at the edge,
		// the gateway reads none
		p := mxProviderFor(k)
		r.target, r.body = "/"+k.provider(), p.body
		r.header = append(common, p.header...)
		r.keyed = true
	}
	return r
}

// mxSign adds the headers of kind k that sign the URL the request is sent
// to (Twilio).
func mxSign(k mxKind, url, body string) []mxHeader {
	if k < mxFirstProvider || mxProviderFor(k).signURL == nil {
		return nil
	}
	return mxProviderFor(k).signURL(url, body)
}

// mxWantReq is one request the gateway must receive.
type mxWantReq struct {
	target string // request target as the gateway reads it
	host   string
	// header is every header the gateway must get, exactly, except
	// Idempotency-Key when edgeKey is set.
	header http.Header
	// edgeKey: the edge chooses the Idempotency-Key (the event id: a
	// UUID, the reply's runId on a spooled path).
	edgeKey bool
	// raw is a forwarded request's body, exactly; action a rendered
	// one's decoded body, its message (agent) the text inside the
	// boundary of source wrap when wrap is set.
	raw    string
	action map[string]any
	wrap   string
}

// mxWant computes what the gateway must receive for kind k sent to a
// handler of mode through path (host: the sender's Host). It is the one
// expectation of every path: only edgeKey depends on the path.
func mxWant(mode string, k mxKind, path mxPath, host string) []mxWantReq {
	req := mxRequestFor(k)
	forwarded := k == mxForwardMapping || mode == "forward" && (k == mxWake || k == mxAgent || k == mxPreset || k == mxSignedMapping || k >= mxFirstProvider)
	if forwarded {
		w := mxWantReq{target: mxGatewayPrefix + req.target, host: host, raw: req.body, header: http.Header{}}
		if k == mxAgent {
			// default_session_key when the sender gave none: the last member
			w.raw = strings.TrimSuffix(req.body, "}") + `,"sessionKey":"` + mxSessionKey + `"}`
		}
		for _, h := range req.header {
			if h.crosses {
				w.header.Add(h.name, h.value)
			}
		}
		if k >= mxFirstProvider && mxProviderFor(k).forwarded != "" {
			// the gateway takes JSON: the provider's body crosses as the
			// JSON it stands for (docs/openclaw.md's differences)
			w.raw = mxProviderFor(k).forwarded
			w.header.Set("Content-Type", "application/json")
		}
		mxEdgeHeaders(w.header, len(w.raw))
		w.edgeKey = path.spooled() && !req.gatewayKey
		return []mxWantReq{w}
	}
	rendered := func(action map[string]any, wrap string) mxWantReq {
		w := mxWantReq{target: mxGatewayPrefix + "/agent", host: "gateway", action: action, edgeKey: true, header: http.Header{
			"Content-Type": {"application/json; charset=utf-8"}, "User-Agent": {mxEdgeUserAgent}}}
		if action["text"] != nil {
			w.target = mxGatewayPrefix + "/wake"
		}
		if mode == "render" {
			w.wrap = wrap // wrap edge; forward mode's wrap gateway leaves it to the gateway
		}
		mxEdgeHeaders(w.header, -1)
		return w
	}
	agent := func(message, name string) map[string]any {
		return map[string]any{"message": message, "name": name, "agentId": "main", "sessionKey": mxSessionKey}
	}
	switch k {
	case mxWake:
		return []mxWantReq{rendered(map[string]any{"text": "mx-wake: deploy finished", "mode": "now"}, "")}
	case mxAgent:
		a := agent("mx-agent: summarise build 42", "CI")
		a["deliver"] = false
		return []mxWantReq{rendered(a, "Webhook")}
	case mxPreset:
		var out []mxWantReq
		for _, m := range mxGmailMessages {
			a := agent("New email from "+m["from"]+"\nSubject: "+m["subject"]+"\n"+m["snippet"]+"\n"+m["body"], "Gmail")
			a["sessionKey"], a["wakeMode"] = "hook:gmail:"+m["id"], "now"
			out = append(out, rendered(a, "Email"))
		}
		return out
	case mxRenderMapping:
		return []mxWantReq{rendered(agent("Deploy mx-render-api ok env=prod by alice", "Deploy"), "Webhook")}
	case mxSignedMapping:
		return []mxWantReq{rendered(agent("PR #7 opened: mx-signed feature", "GitHub"), "Webhook")}
	case mxTransformMapping:
		return []mxWantReq{rendered(agent("order mx-transform-9 paid (probe-transform-mapping, stage)", "Transform"), "Webhook")}
	default:
		a := agent(mxProviderFor(k).message, "")
		delete(a, "name") // the mapping sets none: the gateway's default
		return []mxWantReq{rendered(a, "Webhook")}
	}
}

// mxEdgeHeaders adds what the edge itself sends with every request: its
// gateway credential, the sender's trace context, the client address
// (gateway_forward_client_ip) and the body's length n (n < 0: a rendered
// body, whose Content-Length check takes the body received).
func mxEdgeHeaders(h http.Header, n int) {
	h.Set("Authorization", "Bearer "+itGatewayToken)
	h.Set("Traceparent", mxTraceParent)
	h.Set("Tracestate", mxTraceState)
	h.Set("X-Forwarded-For", mxClientIP)
	if n >= 0 {
		h.Set("Content-Length", strconv.Itoa(n))
	}
}

// check reports how rec differs from w ("" = it is what w wants).
func (w mxWantReq) check(rec devgw.Received) string {
	var bad []string
	if rec.Target != w.target {
		bad = append(bad, fmt.Sprintf("target %q, want %q", rec.Target, w.target))
	}
	if rec.Host != w.host {
		bad = append(bad, fmt.Sprintf("Host %q, want %q", rec.Host, w.host))
	}
	got := rec.Header.Clone()
	want := w.header.Clone()
	if w.edgeKey {
		key := got.Values("Idempotency-Key")
		if len(key) != 1 || !uuidRE.MatchString(key[0]) {
			bad = append(bad, fmt.Sprintf("Idempotency-Key %q, want the event id (a UUID)", key))
		}
		got.Del("Idempotency-Key")
	}
	if w.action != nil {
		want.Set("Content-Length", strconv.Itoa(len(rec.Raw)))
	}
	if !reflect.DeepEqual(got, want) {
		bad = append(bad, fmt.Sprintf("headers\n\t%v\nwant\n\t%v", got, want))
	}
	if w.action == nil {
		if string(rec.Raw) != w.raw {
			bad = append(bad, fmt.Sprintf("body %q, want %q", rec.Raw, w.raw))
		}
	} else if diff := w.checkAction(rec.Raw); diff != "" {
		bad = append(bad, diff)
	}
	return strings.Join(bad, "; ")
}

// checkAction compares a rendered body with the action.
func (w mxWantReq) checkAction(raw []byte) string {
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		return fmt.Sprintf("body %q is not a JSON object: %v", raw, err)
	}
	if w.wrap != "" {
		msg, _ := got["message"].(string)
		source, content, ok := unwrapBoundary(msg)
		if !ok || source != w.wrap {
			return fmt.Sprintf("message %q: want it inside the boundary with Source: %s", msg, w.wrap)
		}
		got["message"] = content
	}
	if !reflect.DeepEqual(got, w.action) {
		return fmt.Sprintf("action %v, want %v", got, w.action)
	}
	return ""
}

// unwrapBoundary returns the source and the content of a message inside
// the external-content boundary (the notice, the markers with one id).
func unwrapBoundary(msg string) (source, content string, ok bool) {
	rest, ok := strings.CutPrefix(msg, boundary.Notice+"\n\n"+boundary.MarkerOpen+` id="`)
	if !ok || len(rest) < 16 {
		return "", "", false
	}
	id, rest := rest[:16], rest[16:]
	if rest, ok = strings.CutPrefix(rest, "\">>>\nSource: "); !ok {
		return "", "", false
	}
	if source, rest, ok = strings.Cut(rest, "\n---\n"); !ok {
		return "", "", false
	}
	content, ok = strings.CutSuffix(rest, "\n"+boundary.MarkerClose+` id="`+id+`">>>`)
	return source, content, ok
}

// mxCheckReply reports how the sender's reply to a cell differs from
// what it must be, given the gateway requests the cell made (in the
// order of mxWant).
func mxCheckReply(mode string, k mxKind, path mxPath, r result, recs []devgw.Received) string {
	if r.status != http.StatusOK || r.header.Get("X-Content-Type-Options") != "nosniff" {
		return fmt.Sprintf("reply %d %s (nosniff %q), want 200", r.status, r.body, r.header.Get("X-Content-Type-Options"))
	}
	if k >= mxFirstProvider && mxProviderFor(k).ack != "" {
		// the provider's acknowledgement, whatever the mode and the path
		if p := mxProviderFor(k); r.body != p.ack || r.header.Get("Content-Type") != p.ackType {
			return fmt.Sprintf("reply %s (%s), want the acknowledgement %s (%s)", r.body, r.header.Get("Content-Type"), p.ack, p.ackType)
		}
		return ""
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		return fmt.Sprintf("reply %q: %v", r.body, err)
	}
	wake := recs[0].Kind == "wake"
	ids := make([]any, len(recs))
	want := map[string]any{"ok": true}
	if !path.spooled() {
		// the gateway's reply passes through; a fan-out lists its runIds
		for i, rec := range recs {
			ids[i] = rec.RunID
		}
		if wake {
			want["mode"], want["eventOutcome"] = "now", "enqueued"
		}
	} else {
		// the event ids; the Idempotency-Key of each request when the
		// edge chose it, else (a forwarded request with the sender's
		// key) an id of the edge's own
		reqs := mxWant(mode, k, path, "")
		for i, rec := range recs {
			id, _ := got["runId"].(string)
			if len(recs) > 1 {
				list, _ := got["runIds"].([]any)
				if len(list) != len(recs) {
					return fmt.Sprintf("reply %s: want %d runIds", r.body, len(recs))
				}
				id, _ = list[i].(string)
			}
			if reqs[i].edgeKey && !wake {
				ids[i] = rec.Header.Get("Idempotency-Key")
			} else if uuidRE.MatchString(id) {
				ids[i] = id
			} else {
				ids[i] = "<a UUID>"
			}
		}
		if wake {
			want["mode"] = "now"
		}
	}
	if !wake {
		want["runId"] = ids[0]
		if len(ids) > 1 {
			want["runIds"], want["dispatched"] = ids, float64(len(ids))
		}
	}
	if !reflect.DeepEqual(got, want) {
		wj, _ := json.Marshal(want)
		return fmt.Sprintf("reply %s, want %s", r.body, wj)
	}
	return ""
}

// mxComparable is rec as it must be the same on every path: the target,
// the Host, every header and the body, with the documented differences
// (see the top of this file) taken out: the Idempotency-Key the edge
// chose when the sender gave none and the boundary id of a wrapped
// message.
func mxComparable(rec devgw.Received, w mxWantReq, keyed bool) string {
	h := rec.Header.Clone()
	if w.edgeKey && !keyed || w.edgeKey && w.action == nil {
		h.Del("Idempotency-Key")
	}
	hj, _ := json.Marshal(h)
	body := boundaryID.ReplaceAllString(string(rec.Raw), `id=<id>`)
	return fmt.Sprintf("POST %s\nHost: %s\n%s\n%q", rec.Target, rec.Host, hj, body)
}

// mxGroup is one dispatch path of one mode: its handler(s) and gateway.
type mxGroup struct {
	mode string
	path mxPath
	base string // the base path senders use
	gw   *testGateway
}

// deliverer is the base path of the handler that sends g's events to
// the gateway.
func (g *mxGroup) deliverer() string {
	if g.path == mxSync || g.path == mxSpool {
		return g.base
	}
	return g.base + "-deliver"
}

// mxCell is one cell's outcome for the summary.
type mxCell struct {
	mode   string
	path   mxPath
	kind   mxKind
	result string // "ok" or "FAIL"
}

// TestCombinationMatrix runs the matrix: 2 modes × 5 paths × 7 kinds,
// every cell checked against mxWant and mxCheckReply and, off the sync
// path, against what the sync path delivered (mxComparable). The R3 path
// needs a three-server JetStream cluster and is skipped with -short (the
// race run); every other cell always runs. The summary table is logged.
func TestCombinationMatrix(t *testing.T) {
	mxSignedAt = time.Now()
	for name, v := range map[string]string{"CH_MX_GITHUB_SECRET": mxGitHubSecret, "CH_MX_SHOPIFY": mxShopifySecret,
		"CH_MX_TWILIO": mxTwilioSecret, "CH_MX_GITLAB": mxGitLabSecret, "CH_MX_FEISHU_TOKEN": mxFeishuToken, "CH_MX_FEISHU_KEY": mxFeishuKey} {
		t.Setenv(name, v)
	}
	root := writeModules(t, t.TempDir(), map[string]string{"matrix.js": mxTransform})
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, googleJWKS(t), 0o600); err != nil {
		t.Fatal(err)
	}

	skipped := map[mxPath]string{}
	if testing.Short() {
		skipped[mxClusterR3] = "-short: a three-server JetStream cluster (replicas 3) is left to the full run"
	}
	r1 := natstest.Run(t, natstest.Options{})
	var r3 *natstest.Cluster
	if skipped[mxClusterR3] == "" {
		r3 = natstest.RunCluster(t, 3)
	}
	in := startIngress(t, ingressOpts{noGW: true})

	type clusterHandler struct {
		base  string
		proxy *natstest.Proxy
		r1    bool // behind the R1 server (stopped for the fallback path)
	}
	var groups []*mxGroup
	var cluster []clusterHandler
	var handlers []string
	for _, mode := range mxModes {
		for path := range mxPaths {
			if skipped[path] != "" {
				continue
			}
			g := &mxGroup{mode: mode, path: path, base: "/" + mode + "-" + path.String(),
				gw: serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true, Prefix: mxGatewayPrefix})}
			groups = append(groups, g)
			common := "token " + itHookToken + "\n\t\tgateway_token " + itGatewayToken + "\n\t\t" + testTransformTimeout +
				"\n\t\t" + mxHooks(mode, root, jwks)
			// the gateway settings, only where there is a gateway
			gateway := "\n\t\tgateway unix/" + g.gw.sock + "\n\t\tgateway_prefix " + mxGatewayPrefix + "\n\t\tgateway_forward_client_ip"
			hooks := func(base, lines string) {
				handlers = append(handlers, "\thooks "+base+" {\n\t\t"+common+lines+"\n\t}\n")
			}
			switch path {
			case mxSync:
				hooks(g.base, gateway)
			case mxSpool:
				hooks(g.base, gateway+"\n\t\tspool "+t.TempDir()+" {\n\t\t\tretry_initial 20ms\n\t\t\tretry_max 100ms\n\t\t}")
			default:
				// an edge (deliver off, no gateway) and a delivery node next
				// to the gateway, in a namespace of their own. The queue
				// edges refuse rather than fall back, so that a 200 there
				// means the queue took the event.
				ns := "mx-" + mode + "-" + path.String()
				server, replicas, fallback := func(int) string { return r1.Addr() }, "", "reject"
				if path == mxClusterR3 {
					server = func(i int) string { return r3.Servers[i].Addr() }
					replicas = "\n\t\t\treplicas 3"
				}
				if path == mxFallback {
					fallback = t.TempDir()
				}
				for i, node := range []struct{ base, lines string }{
					{g.deliverer(), gateway + "\n\t\tspool cluster {\n\t\t\tfallback reject\n\t\t\tretry_initial 50ms\n\t\t\tretry_max 200ms\n\t\t}"},
					{g.base, "\n\t\tspool cluster {\n\t\t\tdeliver off\n\t\t\tfallback " + fallback + "\n\t\t}"},
				} {
					p := natstest.NewProxy(t, server(i))
					cluster = append(cluster, clusterHandler{base: node.base, proxy: p, r1: path != mxClusterR3})
					hooks(node.base, node.lines+"\n\t\tcluster nats "+p.URL()+" {\n\t\t\tname "+ns+replicas+
						"\n\t\t\ttimeout 2s\n\t\t\tack_wait 5s\n\t\t\tsigning_key "+itClusterKey+"\n\t\t}")
				}
			}
		}
	}
	in.load(in.caddyfile(testSiteAddress + " {\n\tbind 127.0.0.1\n" + strings.Join(handlers, "") + "\trespond \"no hooks handler here\" 404\n}\n"))
	host := strings.TrimPrefix(in.base, "http://")
	handlerAt := func(base string) *Handler {
		for _, rh := range runningHooks(t) {
			if rh.h.base == base {
				return rh.h
			}
		}
		t.Fatalf("no running handler at %s", base)
		return nil
	}
	for _, c := range cluster {
		h := handlerAt(c.base)
		testkit.WaitForState(t, func() string { return c.base + " connected to NATS" }, h.cluster.backend.Up)
	}

	// the sender: exactly the headers of the request (no Accept-Encoding
	// or User-Agent of the client's own)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	t.Cleanup(client.CloseIdleConnections)
	send := func(g *mxGroup, k mxKind) result {
		req := mxRequestFor(k)
		hr, err := http.NewRequest(http.MethodPost, in.base+g.base+req.target, strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range append(req.header, mxSign(k, in.base+g.base+req.target, req.body)...) {
			hr.Header.Add(h.name, h.value)
		}
		resp, err := client.Do(hr)
		if err != nil {
			t.Fatalf("%s %s: %v", g.base, k, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}

	var cells []mxCell
	reference := map[string][]devgw.Received{} // mode/kind → what the sync path delivered, in mxWant's order
	replies := map[*mxGroup][]result{}
	replays := map[*mxGroup]map[mxKind]result{} // a keyed request sent again
	sendGroups := func(gs []*mxGroup) {
		for _, g := range gs {
			replays[g] = map[mxKind]result{}
			for k := range mxKinds {
				replies[g] = append(replies[g], send(g, k))
				if mxRequestFor(k).keyed {
					replays[g][k] = send(g, k)
				}
			}
		}
	}
	// checkGroups waits for every request of the groups' cells at their
	// gateways and checks each cell.
	checkGroups := func(gs []*mxGroup) {
		for _, g := range gs {
			total := 0
			for k := range mxKinds {
				total += len(mxWant(g.mode, k, g.path, host))
			}
			if !testkit.Eventually(testkit.PollTimeout, func() bool { return len(g.gw.Received()) >= total }) {
				// the cells say which requests are missing
				dead := ""
				if g.path.spooled() {
					_, dead = adminCall(t, http.MethodGet, "/hooks/spool/dead?path="+g.deliverer(), "")
				}
				t.Errorf("%s: %d of %d requests at the gateway after %v; dead letters: %s", g.base, len(g.gw.Received()), total, testkit.PollTimeout, dead)
			}
			got := g.gw.Received()
			for k := range mxKinds {
				cell := mxCell{mode: g.mode, path: g.path, kind: k, result: "ok"}
				t.Run(g.mode+"/"+g.path.String()+"/"+k.String(), func(t *testing.T) {
					defer func() {
						if t.Failed() {
							cell.result = "FAIL"
						}
					}()
					wants := mxWant(g.mode, k, g.path, host)
					var mine []devgw.Received
					for _, rec := range got {
						if strings.Contains(string(rec.Raw), k.marker()) {
							mine = append(mine, rec)
						}
					}
					if len(mine) != len(wants) {
						t.Fatalf("the gateway received %d requests, want %d: %v", len(mine), len(wants), mine)
					}
					// match each wanted request with the one received that
					// satisfies it (a fan-out may arrive in any order)
					ordered := make([]devgw.Received, len(wants))
					for i, w := range wants {
						found := -1
						var diffs []string
						for j, rec := range mine {
							diff := w.check(rec)
							if diff == "" {
								found = j
								break
							}
							diffs = append(diffs, diff)
						}
						if found < 0 {
							t.Fatalf("request %d of %d: none of the received ones is what it must be:\n%s", i+1, len(wants), strings.Join(diffs, "\n"))
						}
						ordered[i] = mine[found]
						mine = slices.Delete(mine, found, found+1)
					}
					for _, rec := range ordered {
						if rec.Status != http.StatusOK {
							t.Errorf("the gateway answered %d to %s", rec.Status, rec.Target)
						}
					}
					first := replies[g][k]
					if diff := mxCheckReply(g.mode, k, g.path, first, ordered); diff != "" {
						t.Error(diff)
					}
					// a keyed request sent again gets the first reply and
					// dispatches nothing (counted above, and at the end)
					if again, ok := replays[g][k]; ok && (again.status != first.status || again.body != first.body) {
						t.Errorf("the same request with its key again: %d %s, want the first reply %d %s", again.status, again.body, first.status, first.body)
					}
					ref := g.mode + "/" + k.String()
					if g.path == mxSync {
						reference[ref] = ordered
						return
					}
					sync, ok := reference[ref]
					if !ok {
						t.Fatal("no sync reference")
					}
					keyed := mxRequestFor(k).keyed
					for i, w := range wants {
						syncW := mxWant(g.mode, k, mxSync, host)[i]
						if a, b := mxComparable(ordered[i], w, keyed), mxComparable(sync[i], syncW, keyed); a != b {
							t.Errorf("request %d differs from the sync path's beyond the documented differences:\n%s\nsync:\n%s", i+1, a, b)
						}
					}
				})
				cells = append(cells, cell)
			}
		}
	}
	byPath := func(p mxPath) []*mxGroup {
		var out []*mxGroup
		for _, g := range groups {
			if g.path == p {
				out = append(out, g)
			}
		}
		return out
	}

	for _, p := range []mxPath{mxSync, mxSpool, mxClusterR1, mxClusterR3} {
		sendGroups(byPath(p))
		checkGroups(byPath(p))
	}

	// NATS down: the fallback edges answer from their fallback spools;
	// once NATS is back the events move into the queue and the delivery
	// nodes send them
	fb := byPath(mxFallback)
	fallbacks := clusterMetric(t, "caddy_hooks_cluster_fallbacks_total")
	r1.Stop()
	for _, g := range fb {
		h := handlerAt(g.base)
		testkit.WaitForState(t, func() string { return g.base + " sees NATS down" }, func() bool { return !h.cluster.backend.Up() })
	}
	sendGroups(fb)
	for _, g := range fb {
		for k, r := range replies[g] {
			if r.status != http.StatusOK {
				t.Fatalf("%s %s with NATS down: %d %s, want 200 from the fallback spool", g.base, mxKind(k), r.status, r.body)
			}
		}
	}
	events := 0
	for _, g := range fb {
		for k := range mxKinds {
			events += len(mxWant(g.mode, k, g.path, host))
		}
	}
	if n := clusterMetric(t, "caddy_hooks_cluster_fallbacks_total") - fallbacks; n != float64(events) {
		t.Errorf("caddy_hooks_cluster_fallbacks_total grew by %v, want %d (every event of the fallback cells)", n, events)
	}
	for _, g := range fb {
		if n := len(g.gw.Received()); n != 0 {
			t.Fatalf("%s: the gateway received %d requests while NATS was down", g.base, n)
		}
	}
	r1.Restart(t)
	for _, c := range cluster {
		if c.r1 {
			c.proxy.SetTarget(r1.Addr())
		}
	}
	checkGroups(fb)

	// nothing delivered twice: every gateway got exactly its cells'
	// requests (the last checks ran a while after the first deliveries)
	for _, g := range groups {
		total := 0
		for k := range mxKinds {
			total += len(mxWant(g.mode, k, g.path, host))
		}
		if n := len(g.gw.Received()); n != total {
			t.Errorf("%s: the gateway received %d requests, want %d", g.base, n, total)
		}
	}

	// the summary
	var b strings.Builder
	ran, failed := 0, 0
	fmt.Fprintf(&b, "combination matrix: %d modes × %d paths × %d kinds\n", len(mxModes), mxPaths, mxKinds)
	fmt.Fprintf(&b, "%-8s %-11s", "mode", "path")
	for k := range mxKinds {
		fmt.Fprintf(&b, " %-17s", strings.TrimPrefix(k.String(), "provider-"))
	}
	b.WriteString("\n")
	for _, mode := range mxModes {
		for p := range mxPaths {
			fmt.Fprintf(&b, "%-8s %-11s", mode, p)
			for k := range mxKinds {
				res := "skipped"
				if skipped[p] == "" {
					for _, c := range cells {
						if c.mode == mode && c.path == p && c.kind == k {
							res = c.result
						}
					}
				}
				switch res {
				case "ok":
					ran++
				case "FAIL":
					ran++
					failed++
				}
				fmt.Fprintf(&b, " %-17s", res)
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "%d cells run (%d failed), %d skipped; not applicable: none (every kind exists in both modes)", ran, failed, int(mxPaths)*int(mxKinds)*len(mxModes)-ran)
	for p := range mxPaths {
		if skipped[p] != "" {
			fmt.Fprintf(&b, "\nskipped: %s (%d cells): %s", p, int(mxKinds)*len(mxModes), skipped[p])
		}
	}
	t.Log(b.String())
}

// TestSpooledEventUsesDeliveringGatewaySettings (two defects the
// combination matrix found, with the gateway settings only where there
// is a gateway): a spooled event is sent under the gateway prefix of the
// handler that delivers it, and with the client address when that
// handler has gateway_forward_client_ip, as a rendered action always was
// for the prefix. Before the fixes a forwarded event kept the prefix of
// the handler that accepted it, and an event carried the client address
// only when that handler had gateway_forward_client_ip: through the
// cluster queue, an edge without a gateway (so with the defaults) sent
// every forwarded hook of a delivery node with `gateway_prefix
// /gw/hooks` to /hooks/…, a 404 dead letter, and no event with an
// X-Forwarded-For; here, a reload that moves the gateway's prefix and
// turns the client address on did neither for the events already spooled.
func TestSpooledEventUsesDeliveringGatewaySettings(t *testing.T) {
	before := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true})
	before.FailWith(func(string) int { return http.StatusServiceUnavailable }) // hold the events in the spool
	after := serveGateway(t, devgw.Config{Token: itGatewayToken, Record: true, Prefix: "/v2/hooks"})
	dir := t.TempDir()
	in := startIngress(t, ingressOpts{noGW: true})
	config := func(gw *testGateway, settings string) string {
		return in.caddyfile(testSiteAddress + ` {
	bind 127.0.0.1
	hooks {
		token ` + itHookToken + `
		gateway unix/` + gw.sock + `
		gateway_token ` + itGatewayToken + `
		` + settings + `
		mode forward
		mapping ci {
			match_path ci
			forward
		}
		spool ` + dir + ` {
			retry_initial 20ms
			retry_max 100ms
		}
	}
}
`)
	}
	in.load(config(before, "gateway_prefix /hooks"))
	for _, target := range []string{"/hooks/ci?pipeline=7", "/hooks/agent"} {
		if r := in.post(target, `{"message":"spooled under the old settings"}`); r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", target, r.status, r.body)
		}
	}
	if _, body := adminCall(t, http.MethodGet, "/hooks/?path=/hooks", ""); !strings.Contains(body, `"depth":2`) {
		t.Fatalf("status %s: want both events in the spool", body)
	}

	in.load(config(after, "gateway_prefix /v2/hooks\n\t\tgateway_forward_client_ip"))
	deadLetters := func() string {
		_, body := adminCall(t, http.MethodGet, "/hooks/spool/dead?path=/hooks", "")
		return body
	}
	testkit.WaitForState(t, func() string { return "both events at the moved gateway; dead letters: " + deadLetters() }, func() bool {
		return len(after.Received()) == 2 || strings.Contains(deadLetters(), `"id"`)
	})
	var got []string
	for _, rec := range after.Received() {
		got = append(got, rec.Target+" X-Forwarded-For: "+rec.ForwardedFor)
	}
	slices.Sort(got)
	if want := []string{"/v2/hooks/agent X-Forwarded-For: 127.0.0.1", "/v2/hooks/ci?pipeline=7 X-Forwarded-For: 127.0.0.1"}; !slices.Equal(got, want) {
		t.Fatalf("the moved gateway received %q, want %q; dead letters: %s", got, want, deadLetters())
	}
}
