package verify

const gitlabPush = `{"object_kind":"push","user_username":"jsmith","project":{"path_with_namespace":"mike/diaspora"},"commits":[]}`

var _ = providerTest("gitlab", providerTests{
	vectors: []vector{{
		name:   "push hook",
		source: "computed from https://docs.gitlab.com/user/project/integrations/webhooks/#validate-requests-with-a-secret-token: the token is sent as is in X-Gitlab-Token",
		cfg:    Config{Scheme: "gitlab", Secrets: []string{genericSecret}},
		req: post(gitlabPush, "X-Gitlab-Token", genericSecret, "X-Gitlab-Event", "Push Hook",
			"X-Gitlab-Event-UUID", "13792a34-cac6-4fda-95a8-c58e00a3954e"),
		now:  testNow,
		want: Result{DeliveryID: "13792a34-cac6-4fda-95a8-c58e00a3954e", Event: "Push Hook"},
	}},
	notes: "a token does not cover the body",
})
