package verify

func init() {
	register(&Provider{
		Name:             "gitlab",
		Title:            "GitLab",
		Family:           FamilyToken,
		Signature:        "X-Gitlab-Token: <the secret token> (sent as is)",
		Doc:              "https://docs.gitlab.com/user/project/integrations/webhooks/#validate-requests-with-a-secret-token",
		Notes:            "GitLab sends the webhook's secret token itself: it authenticates the sender, not the body, and anyone who sees one request can replay it. X-Gitlab-Event-UUID deduplicates redeliveries.",
		SignatureHeaders: []string{"X-Gitlab-Token"},
		DeliveryID:       oneOf(fromHeader("X-Gitlab-Event-UUID"), fromHeader("Idempotency-Key")),
		Event:            oneOf(fromHeader("X-Gitlab-Event"), fromJSON("object_kind")),
		Template:         "GitLab {{event}} on {{payload.project.path_with_namespace}} by {{payload.user_username}}{{payload.user.username}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		build:            tokenProvider(tokenSpec{header: "X-Gitlab-Token"}),
	})
}
