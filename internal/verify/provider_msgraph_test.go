package verify

import (
	"strings"
	"testing"
)

const graphBody = `{"value":[{"subscriptionId":"7f105c7d-2dc5-4530-97cd-4e7ae6534c07","clientState":"graph-client-state-1","changeType":"created","resource":"Users/{id}/messages/{id}","tenantId":"84bd8158"}]}`

var _ = providerTest("msgraph", providerTests{
	vectors: []vector{{
		name:   "message created",
		source: "computed from https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks#change-notification-example: every notification carries the subscription's clientState",
		cfg:    Config{Scheme: "msgraph", ClientState: "graph-client-state-1"},
		req:    post(graphBody),
		now:    testNow,
		want:   Result{DeliveryID: bodyID(graphBody), Event: "created"},
	}},
	handshakes: []handshakeCase{{
		name:   "validationToken",
		source: "computed from https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks#notificationurl-validation: the decoded validationToken as text/plain",
		req:    req("POST", hookURL+"?validationToken=Validation%3A+Testing+client+application+reachability+for+subscription+Request-Id%3A+4f5bb2b9", ""),
		status: 200, ctype: "text/plain", body: "Validation: Testing client application reachability for subscription Request-Id: 4f5bb2b9",
	}},
	wrong: func(_ *testing.T, cfg Config) Config { cfg.ClientState = "another-client-state"; return cfg },
	strip: func(r *Request) { r.Body = []byte(strings.Replace(string(r.Body), `"clientState"`, `"state"`, 1)) },
	notes: "clientState does not cover the body",
})
