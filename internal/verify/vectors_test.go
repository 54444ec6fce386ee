package verify

import (
	"net/http"
	"testing"
	"time"
)

// TestDocumentedVectors checks the providers' published examples verbatim.
func TestDocumentedVectors(t *testing.T) {
	slackBody := "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	tests := []struct {
		name string
		cfg  Config
		h    http.Header
		body string
		now  time.Time
		want Result
	}{
		{
			name: "github docs example",
			cfg:  Config{Scheme: SchemeGitHub, Secrets: []string{"It's a Secret to Everybody"}},
			h: hdr("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
				"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
			body: "Hello, World!",
			now:  testNow,
			want: Result{DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		},
		{
			name: "standard webhooks docs example",
			cfg:  Config{Scheme: SchemeStandard, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
			h: hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek",
				"webhook-timestamp", "1614265330",
				"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
			body: `{"test": 2432232314}`,
			now:  time.Unix(1614265330, 0),
			want: Result{DeliveryID: "msg_p5jXN8AQM9LWM0D4loKWxJek"},
		},
		{
			name: "slack docs example",
			cfg:  Config{Scheme: SchemeSlack, Secrets: []string{"8f742231b10e8888abcd99yyyzzz85a5"}},
			h: hdr("X-Slack-Request-Timestamp", "1531420618",
				"X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"),
			body: slackBody,
			now:  time.Unix(1531420618+30, 0),
			want: Result{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustNew(t, tt.cfg)
			got, err := v.Verify(tt.h, []byte(tt.body), tt.now)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if !sameResult(got, tt.want) {
				t.Fatalf("Verify = %+v, want %+v", got, tt.want)
			}
			// The same request with the body one byte longer must fail.
			if _, err := v.Verify(tt.h, []byte(tt.body+" "), tt.now); err == nil {
				t.Fatal("Verify accepted a tampered body")
			}
		})
	}
}
