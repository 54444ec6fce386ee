package verify

import (
	"net/url"
	"strings"
)

var (
	mattermostForm = url.Values{"token": {genericSecret}, "channel_name": {"town-square"}, "user_name": {"ann"},
		"post_id": {"rrmyaeb3pfbpfjgowwp3xm9kqa"}, "text": {"agent: summarise today"}, "trigger_word": {"agent:"}}.Encode()
	mattermostJSON = `{"token":"` + genericSecret + `","channel_name":"town-square","user_name":"ann","post_id":"p2","text":"agent: hi","trigger_word":"agent:"}`
)

var _ = providerTest("mattermost", providerTests{
	vectors: []vector{{
		name:   "form",
		source: "computed from https://developers.mattermost.com/integrate/webhooks/outgoing/: the token is a form field",
		cfg:    Config{Scheme: "mattermost", Secrets: []string{genericSecret}},
		req:    post(mattermostForm, "Content-Type", formCT),
		now:    testNow,
		want: Result{DeliveryID: "rrmyaeb3pfbpfjgowwp3xm9kqa", Event: "agent:",
			Payload: []byte(`{"channel_name":"town-square","post_id":"rrmyaeb3pfbpfjgowwp3xm9kqa","text":"agent: summarise today","trigger_word":"agent:","user_name":"ann"}`)},
	}, {
		name:   "JSON",
		source: "computed from https://developers.mattermost.com/integrate/webhooks/outgoing/: the token is a JSON member (Content-Type application/json)",
		cfg:    Config{Scheme: "mattermost", Secrets: []string{genericSecret}},
		req:    post(mattermostJSON, "Content-Type", "application/json"),
		now:    testNow,
		want: Result{DeliveryID: "p2", Event: "agent:",
			Payload: []byte(`{"channel_name":"town-square","user_name":"ann","post_id":"p2","text":"agent: hi","trigger_word":"agent:"}`)},
	}},
	strip: func(r *Request) {
		r.Body = []byte(strings.Replace(string(r.Body), "token="+genericSecret, "x=1", 1))
	},
	notes: "a token does not cover the body",
})
