package verify

import (
	"encoding/json"
	"errors"
)

// bodyFields are the top-level members of a verified JSON body that carry
// a delivery id or a Slack challenge. Members of another type are left
// empty. (encoding/json matches member names case-insensitively,
// preferring exact matches; the body is provider-signed by then.)
type bodyFields struct {
	ID        string `json:"id"`        // Stripe event id
	Type      string `json:"type"`      // Slack: url_verification or event_callback
	EventID   string `json:"event_id"`  // Slack event id
	Challenge string `json:"challenge"` // Slack url_verification
}

// readBodyFields decodes the fields of the JSON object body; all are empty
// when body is not a JSON object. It runs only after the signature has
// been verified.
func readBodyFields(body []byte) bodyFields {
	var f bodyFields
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(body, &f); err != nil && !errors.As(err, &typeErr) {
		return bodyFields{}
	}
	return f
}
