package verify

import (
	"net/http"
	"strings"
	"time"
)

// maxHeaderLen bounds a signature header value; longer ones are malformed.
const maxHeaderLen = 4096

// maxTimestampDigits bounds a unix-seconds timestamp (10 digits until 2286);
// a millisecond timestamp is thereby malformed rather than merely stale.
const maxTimestampDigits = 12

// headerValue returns the value of header name with surrounding blanks
// trimmed, "" when absent or blank. Copies of the header must agree, else
// it fails with ReasonDuplicateHeader. (Plain comparison is fine here: both
// sides are request data, neither is a secret nor an expected MAC.)
func headerValue(h http.Header, name string) (string, error) {
	vals := h.Values(name)
	if len(vals) == 0 {
		return "", nil
	}
	v := trimOWS(vals[0])
	for _, o := range vals[1:] {
		if trimOWS(o) != v {
			return "", fail(ReasonDuplicateHeader, name)
		}
	}
	return v, nil
}

// requireHeader is headerValue failing with missing when the value is
// absent or blank, and with ReasonMalformedSignature when it is longer
// than maxHeaderLen.
func requireHeader(h http.Header, name, missing string) (string, error) {
	v, err := headerValue(h, name)
	switch {
	case err != nil:
		return "", err
	case v == "":
		return "", fail(missing, name)
	case len(v) > maxHeaderLen:
		return "", fail(ReasonMalformedSignature, name)
	}
	return v, nil
}

// trimOWS trims HTTP optional whitespace (spaces and tabs).
func trimOWS(s string) string { return strings.Trim(s, " \t") }

// parseUnix parses a unix-seconds timestamp: 1 to maxTimestampDigits ASCII
// digits, nothing else (no sign, no fraction).
func parseUnix(s string) (int64, bool) {
	if len(s) > maxTimestampDigits {
		return 0, false
	}
	return parseDigits(s)
}

// checkTimestamp parses the timestamp ts taken from header and checks that
// it lies within tol of now, in either direction.
func checkTimestamp(ts, header string, now time.Time, tol time.Duration) error {
	sec, ok := parseUnix(ts)
	if !ok {
		return fail(ReasonMalformedTimestamp, header)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tol || d < -tol {
		return fail(ReasonStaleTimestamp, header)
	}
	return nil
}

// cleanID returns id when it is 1 to MaxDeliveryIDLen bytes of printable
// ASCII without spaces, else "".
func cleanID(id string) string {
	if len(id) == 0 || len(id) > MaxDeliveryIDLen {
		return ""
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return ""
		}
	}
	return id
}
