package caddyhook

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyhook/caddyhook/internal/devgw"
)

// benchPRMessage is the message both mapped benchmarks build.
const benchPRMessage = "PR #{{number}} {{action}} in {{repository.full_name}} by {{pull_request.user.login}}: {{pull_request.title}}\n{{pull_request.html_url}}"

// benchPRTransform builds the same action as the templates of
// benchPRMessage, in TypeScript.
const benchPRTransform = `interface Ctx { payload: any; headers: Record<string, string> }
export default function (ctx: Ctx) {
  const p = ctx.payload, pr = p.pull_request;
  return {
    name: "GitHub",
    message: "PR #" + p.number + " " + p.action + " in " + p.repository.full_name + " by " + pr.user.login + ": " + pr.title + "\n" + pr.html_url,
    sessionKey: "hook:github:" + p.repository.full_name + "#" + p.number,
  };
}`

// benchMappings are the two equivalent mappings BenchmarkMappedAgent
// compares: templates only, and the transform in root.
func benchMappings() []Mapping {
	return []Mapping{
		{ID: "templates", MatchPath: "github", Name: "GitHub", MessageTemplate: benchPRMessage,
			SessionKey: "hook:github:{{repository.full_name}}#{{number}}"},
		{ID: "transform", MatchPath: "github", Transform: &TransformRef{Module: "pr.ts"}},
	}
}

// benchHandler provisions a handler in front of gw with mapping m and the
// benchmark transform in a temp transforms root.
func benchHandler(tb testing.TB, gw *testGateway, m Mapping) *Handler {
	tb.Helper()
	root := tb.TempDir()
	if err := os.WriteFile(filepath.Join(root, "pr.ts"), []byte(benchPRTransform), 0o644); err != nil {
		tb.Fatal(err)
	}
	return newTestHandler(tb, gw, func(h *Handler) {
		h.AllowRequestSessionKey = true
		h.AllowedSessionKeyPrefixes = []string{"hook:"}
		h.TransformsRoot = root
		h.Mappings = []Mapping{m}
	})
}

// TestMappedAgentBenchParity checks the two benchmarked mappings build
// the same gateway body, so the benchmark compares like with like.
func TestMappedAgentBenchParity(t *testing.T) {
	var bodies []map[string]any
	for _, m := range benchMappings() {
		gw := startTestGateway(t, devgw.Config{Record: true})
		h := benchHandler(t, gw, m)
		w := serve(t, h, hookRequest{target: "/hooks/github", body: benchPRBody, header: headers(auth, jsonCT, []string{"X-GitHub-Event", "pull_request"})})
		if w.Code != http.StatusOK || len(gw.Received()) != 1 {
			t.Fatalf("%s: %d %s, gateway %d", m.ID, w.Code, w.Body, len(gw.Received()))
		}
		body := gw.Received()[0].Body
		msg, _ := body["message"].(string)
		if !strings.Contains(msg, "PR #1347 opened in octocat/Hello-World by octocat: Amazing new feature\nhttps://github.com/octocat/Hello-World/pull/1347") {
			t.Fatalf("%s: message %q", m.ID, msg)
		}
		body["message"] = wrapperID.ReplaceAllString(msg, "ID")
		bodies = append(bodies, body)
	}
	if !jsonEqual(bodies[0], bodies[1]) {
		t.Fatalf("templates built %v\ntransform built %v", bodies[0], bodies[1])
	}
}

// wrapperID matches the random id of the external-content wrapper.
var wrapperID = regexp.MustCompile(`id="[0-9a-f]{16}"`)

// BenchmarkMappedAgent is the same mapped agent hook (a GitHub
// pull_request, about 2 KiB) built by templates only and by a TypeScript
// transform, through the whole handler to a devgw gateway on a Unix
// socket. The transform path is meant to stay within 3× the template one.
func BenchmarkMappedAgent(b *testing.B) {
	body := []byte(benchPRBody)
	for _, m := range benchMappings() {
		b.Run(m.ID, func(b *testing.B) {
			h := benchHandler(b, startTestGateway(b, devgw.Config{}), m)
			r, rb := benchRequest("/hooks/github", body, "Authorization", "Bearer "+utHookToken,
				"Content-Type", "application/json", "X-GitHub-Event", "pull_request")
			runHandlerBench(b, h, r, body, rb, http.StatusOK, nil)
		})
	}
}

// benchPRBody is a GitHub pull_request delivery of typical shape and size.
const benchPRBody = `{"action":"opened","number":1347,"pull_request":{"url":"https://api.github.com/repos/octocat/Hello-World/pulls/1347",` +
	`"id":1,"node_id":"MDExOlB1bGxSZXF1ZXN0MQ==","html_url":"https://github.com/octocat/Hello-World/pull/1347",` +
	`"diff_url":"https://github.com/octocat/Hello-World/pull/1347.diff","patch_url":"https://github.com/octocat/Hello-World/pull/1347.patch",` +
	`"number":1347,"state":"open","locked":false,"title":"Amazing new feature","user":{"login":"octocat","id":1,` +
	`"avatar_url":"https://github.com/images/error/octocat_happy.gif","type":"User","site_admin":false},` +
	`"body":"Please pull these awesome changes in!","labels":[{"id":208045946,"name":"bug","color":"f29513","default":true}],` +
	`"created_at":"2011-01-26T19:01:12Z","updated_at":"2011-01-26T19:01:12Z","merge_commit_sha":"e5bd3914e2e596debea16f433f57875b5b90bcd6",` +
	`"assignees":[],"requested_reviewers":[{"login":"other_user","id":2,"type":"User"}],` +
	`"head":{"label":"octocat:new-topic","ref":"new-topic","sha":"6dcb09b5b57875f334f61aebed695e2e4193db5e"},` +
	`"base":{"label":"octocat:master","ref":"master","sha":"6dcb09b5b57875f334f61aebed695e2e4193db5e"},` +
	`"author_association":"OWNER","draft":false,"merged":false,"mergeable":true,"comments":10,"review_comments":0,` +
	`"commits":3,"additions":100,"deletions":3,"changed_files":5},` +
	`"repository":{"id":1296269,"node_id":"MDEwOlJlcG9zaXRvcnkxMjk2MjY5","name":"Hello-World","full_name":"octocat/Hello-World",` +
	`"owner":{"login":"octocat","id":1,"type":"User","site_admin":false},"private":false,` +
	`"html_url":"https://github.com/octocat/Hello-World","description":"This your first repo!","fork":false,` +
	`"default_branch":"master","topics":["octocat","atom","electron","api"],"visibility":"public","forks":9,"open_issues":0,"watchers":80},` +
	`"sender":{"login":"octocat","id":1,"type":"User","site_admin":false}}`
