package verify

import "net/http"

func init() {
	register(&Provider{
		Name:             "teams",
		Title:            "Microsoft Teams (outgoing webhook)",
		Family:           FamilyHMAC,
		Signature:        "Authorization: HMAC <base64 HMAC-SHA256(body)> under the base64-decoded security token",
		Doc:              "https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/add-outgoing-webhook",
		Notes:            "The secret is the security token Teams shows when the outgoing webhook is created (base64). Teams wants an answer within 5 s: the edge answers with a short message once accepted. Teams signs no time.",
		SignatureHeaders: []string{"Authorization"},
		DeliveryID:       oneOf(fromJSON("id")),
		Event:            oneOf(fromJSON("type")),
		Template:         "Teams {{event}} from {{payload.from.name}}: {{payload.text}}",
		Words:            []string{"secret"},
		Required:         []string{"secret"},
		SignsBody:        true,
		Ack:              rawJSONAnswer("teams acknowledgement", http.StatusOK, []byte(`{"type":"message","text":"Received."}`)),
		build: macProvider(macSpec{
			key: keyBase64, headers: []string{"Authorization"}, prefix: "HMAC ", enc: encBase64,
			parts: []part{bodyPart()},
		}),
	})
}
