package verify

import "time"

// mailgunScheme checks Mailgun's signature fields, in the JSON body
// ("signature": {timestamp, token, signature}) or in the form (timestamp,
// token, signature): hex HMAC-SHA256 of timestamp+token under the webhook
// signing key.
type mailgunScheme struct {
	m   *macSet
	tol time.Duration
}

func init() {
	register(&Provider{
		Name:       "mailgun",
		Title:      "Mailgun",
		Family:     FamilyHMAC,
		Signature:  "signature {timestamp, token, signature: hex HMAC-SHA256(timestamp+token)} in the (JSON or form) body",
		Doc:        "https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks",
		Notes:      "The key is the HTTP webhook signing key. Mailgun signs only the timestamp and a random token, so the body is not signed: the token (unique per request) is the delivery id, which refuses a replay within the idempotency window. Route forwards posted as multipart/form-data are not supported.",
		Body:       BodyJSONOrForm,
		DeliveryID: oneOf(fromJSON("event-data.id"), fromJSON("signature.token"), fromJSON("token")),
		Event:      oneOf(fromJSON("event-data.event"), fromJSON("event")),
		Template:   "Mailgun {{event}}: {{payload.event-data.recipient}}{{payload.recipient}} {{payload.event-data.message.headers.subject}}{{payload.subject}}",
		Tolerance:  DefaultTolerance,
		SignsBody:  true,
		Words:      []string{"secret"},
		Required:   []string{"secret"},
		build: func(b *builder) (scheme, error) {
			m, err := b.macSet(algSHA256, keyRaw)
			if err != nil {
				return nil, err
			}
			tol, err := b.tolerance()
			return &mailgunScheme{m: m, tol: tol}, err
		},
	})
}

// verify implements scheme.
func (s *mailgunScheme) verify(c *call) error {
	var ts, tok, sig string
	if c.r.isForm() {
		f, err := c.parsedForm()
		if err != nil {
			return fail(ReasonMalformedBody, "")
		}
		ts, tok, sig = f.Get("timestamp"), f.Get("token"), f.Get("signature")
	} else {
		doc := c.body()
		ts, tok, sig = jsonField(doc, "signature", "timestamp"), jsonField(doc, "signature", "token"), jsonField(doc, "signature", "signature")
	}
	switch {
	case sig == "":
		return fail(ReasonMissingSignature, "")
	case ts == "":
		return fail(ReasonMissingTimestamp, "")
	case tok == "" || len(tok) > maxHeaderLen:
		return fail(ReasonMalformedSignature, "")
	}
	var cand candidates
	if r := cand.add(encHex, s.m.size, sig); r != "" {
		return fail(r, "")
	}
	if err := checkTimestamp(ts, "", c.now, s.tol); err != nil {
		return err
	}
	if !s.m.match(&cand, []byte(ts), []byte(tok)) {
		return fail(ReasonBadSignature, "")
	}
	return nil
}
