package transform

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// examplePath locates a module of the repository's testdata/transforms.
func examplePath(name string) string {
	return filepath.Join("..", "..", "testdata", "transforms", name)
}

// githubInput is a pull_request delivery with the given action.
func githubInput(action string) Input {
	return Input{
		Payload: map[string]any{
			"action": action,
			"pull_request": map[string]any{
				"number":   42.0,
				"title":    "Fix the frobnicator",
				"html_url": "https://github.com/acme/widgets/pull/42",
				"user":     map[string]any{"login": "octocat"},
			},
			"repository": map[string]any{"full_name": "acme/widgets"},
		},
		Headers: map[string]string{"x-github-event": "pull_request", "content-type": "application/json"},
		Path:    "github",
	}
}

// TestExamples runs the repository's example transforms.
func TestExamples(t *testing.T) {
	stripe := func(typ string) Input {
		return Input{Payload: map[string]any{
			"id": "evt_1", "type": typ,
			"data": map[string]any{"object": map[string]any{
				"id": "in_123", "customer_email": "ada@example.com", "amount_due": 1999.0, "currency": "eur",
			}},
		}}
	}
	tests := []struct {
		name, module string
		in           Input
		want         map[string]any
	}{
		{"github opened", "github.ts", githubInput("opened"), map[string]any{
			"kind": "agent", "name": "GitHub",
			"message":    "PR #42 opened in acme/widgets by octocat: Fix the frobnicator\nhttps://github.com/acme/widgets/pull/42",
			"sessionKey": "hook:github:pr:acme/widgets#42",
		}},
		{"github closed", "github.ts", githubInput("closed"), nil},
		{"github other event", "github.ts", func() Input {
			in := githubInput("opened")
			in.Headers = map[string]string{"x-github-event": "issues"}
			return in
		}(), nil},
		{"github no event header", "github.ts", func() Input { in := githubInput("opened"); in.Headers = nil; return in }(), nil},
		{"stripe payment failed", "stripe.js", stripe("invoice.payment_failed"), map[string]any{
			"kind": "wake", "mode": "now",
			"text": "Stripe: payment failed for ada@example.com (19.99 EUR) invoice in_123",
		}},
		{"stripe other", "stripe.js", stripe("invoice.paid"), nil},
		{"skip", "skip.js", githubInput("opened"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(examplePath(tc.module), "", Options{})
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Run(context.Background(), tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(out, tc.want) {
				t.Fatalf("Run = %#v\nwant %#v", out, tc.want)
			}
		})
	}
}

// TestExampleGitHubMissingField: the helper's error surfaces as a throw.
func TestExampleGitHubMissingField(t *testing.T) {
	p, err := Compile(examplePath("github.ts"), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := githubInput("opened")
	delete(in.Payload, "repository")
	e := runErr(t, p, in, KindThrow)
	if !strings.Contains(e.Message, "missing field repository") || !strings.Contains(e.Message, "github.ts:") {
		t.Fatalf("message %q", e.Message)
	}
}
