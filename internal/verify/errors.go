package verify

// Reasons carried by [Error]. They name the failure, never its content.
const (
	ReasonMissingSignature   = "missing signature header"
	ReasonMissingTimestamp   = "missing timestamp header"
	ReasonMissingID          = "missing delivery id header"
	ReasonDuplicateHeader    = "conflicting duplicate header"
	ReasonMalformedSignature = "malformed signature header"
	ReasonTooManySignatures  = "too many signatures in header"
	ReasonUnsupportedVersion = "no supported signature version"
	ReasonMalformedTimestamp = "malformed timestamp"
	ReasonStaleTimestamp     = "timestamp outside tolerance"
	ReasonBadSignature       = "bad signature"
	ReasonBadChallenge       = "malformed url_verification challenge"
	ReasonBadToken           = "bad token"
	ReasonMalformedBody      = "malformed signed body"
	ReasonBadHandshake       = "handshake refused"
	ReasonBadClaims          = "token claims refused"
	ReasonUnknownKey         = "no key for the signature"
	ReasonCertificateURL     = "certificate URL not allowed"
	ReasonUnknownTopic       = "topic not accepted"
	ReasonNoSecretYet        = "no secret yet: the handshake has not run"
)

// Error is a verification failure. Reason is one of the Reason constants;
// Header, when set, is the canonical name of the header at fault. Neither
// ever holds a secret, a signature or payload content.
type Error struct {
	Reason string
	Header string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Header != "" {
		return "signature verification failed: " + e.Reason + " (" + e.Header + ")"
	}
	return "signature verification failed: " + e.Reason
}

// Is reports whether target is an *Error with the same Reason, so that
// errors.Is(err, &Error{Reason: ReasonBadSignature}) works whatever the
// header.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

// fail builds the *Error for reason, blaming header (may be "").
func fail(reason, header string) error {
	return &Error{Reason: reason, Header: header}
}
