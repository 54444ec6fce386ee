package verify

import (
	"errors"
	"fmt"
	"net/textproto"
	"time"
)

// schemeTolerance returns cfg's tolerance for a scheme with timestamps.
func schemeTolerance(cfg Config) (time.Duration, error) {
	switch {
	case cfg.Tolerance < 0:
		return 0, errors.New("tolerance: must not be negative")
	case cfg.Tolerance == 0:
		return DefaultTolerance, nil
	}
	return cfg.Tolerance, nil
}

// rejectGenericFields fails when cfg sets a field that only the hmac
// scheme reads, so a misplaced option is not silently ignored.
func rejectGenericFields(cfg Config) error {
	for _, f := range []struct{ name, val string }{
		{"header", cfg.Header}, {"prefix", cfg.Prefix}, {"algorithm", cfg.Algorithm},
		{"encoding", cfg.Encoding}, {"timestamp_header", cfg.TimestampHeader},
		{"layout", cfg.Layout}, {"id_header", cfg.IDHeader},
	} {
		if f.val != "" {
			return fmt.Errorf("%s: only valid with scheme hmac", f.name)
		}
	}
	return nil
}

// headerName validates the header name in field and returns its canonical
// form; "" stays "".
func headerName(field, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return "", fmt.Errorf("%s: %q is not a valid header name", field, name)
		}
	}
	return textproto.CanonicalMIMEHeaderKey(name), nil
}

// isTokenChar reports whether c may appear in an HTTP field name (RFC 9110 token).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
