package verify

import "time"

var _ = providerTest("github", providerTests{
	vectors: []vector{{
		name:   "docs example",
		source: "vector from https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries#testing-the-webhook-payload-validation",
		cfg:    Config{Scheme: "github", Secrets: []string{"It's a Secret to Everybody"}},
		req: post("Hello, World!",
			"X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
			"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Event", "ping"),
		now:  time.Unix(1700000000, 0),
		want: Result{DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Event: "ping"},
	}, {
		name:   "push",
		source: "computed from https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries: sha256= hex HMAC-SHA256 of the body",
		cfg:    Config{Scheme: "github", Secrets: []string{githubSecret}},
		req: post(githubPush, "X-Hub-Signature-256", "sha256="+hexSHA256(githubSecret, githubPush),
			"X-GitHub-Delivery", "d-1", "X-GitHub-Event", "push"),
		now:  testNow,
		want: Result{DeliveryID: "d-1", Event: "push"},
	}},
})

const githubPush = `{"ref":"refs/heads/main","repository":{"full_name":"octo/hello"},"sender":{"login":"octocat"}}`
