// Package secret holds the rules every secret of a caddyhook config
// follows (hook tokens, the gateway token, a cluster's signing keys):
// written as {env.NAME} or {file.PATH} placeholders, expanded at
// provision, and when one expands to nothing the error says why.
package secret

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// placeholder matches the {env.NAME} and {file.PATH} placeholders of a
// secret.
var placeholder = regexp.MustCompile(`\{(env|file)\.([^{}]+)\}`)

// HasPlaceholder reports whether s holds an {env.…} or {file.…}
// placeholder (a secret kept out of the config).
func HasPlaceholder(s string) bool { return placeholder.MatchString(s) }

// Expand returns raw with its placeholders expanded (unknown ones become
// empty), surrounding white space trimmed.
func Expand(raw string) string {
	return strings.TrimSpace(caddy.NewReplacer().ReplaceKnown(raw, ""))
}

// Required expands raw, a secret that must not be empty when it is set:
// it returns the value, or an error naming the field and why it is empty
// (which variable or file). An unset raw is no error (the field is
// optional); callers that require the field check for "" themselves.
func Required(field, raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", nil
	}
	if v := Expand(raw); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%s: %s", field, Empty(raw, ""))
}

// Empty says why a required secret expanded to nothing: which
// environment variable is unset or empty in Caddy's environment, or which
// file is missing or empty. example shows how to set it when raw is empty.
func Empty(raw, example string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return fmt.Sprintf("required (set it, e.g. %s)", example)
	}
	var why []string
	for _, m := range placeholder.FindAllStringSubmatch(raw, -1) {
		switch name := m[2]; m[1] {
		case "env":
			if _, set := os.LookupEnv(name); !set {
				why = append(why, fmt.Sprintf("%s is not set in Caddy's environment", name))
			} else {
				why = append(why, fmt.Sprintf("%s is empty in Caddy's environment", name))
			}
		case "file":
			if _, err := os.Stat(name); err != nil {
				why = append(why, fmt.Sprintf("file %s cannot be read (%v)", name, unwrapPathError(err)))
			} else {
				why = append(why, fmt.Sprintf("file %s is empty", name))
			}
		}
	}
	if len(why) == 0 {
		return fmt.Sprintf("%s expands to nothing", raw)
	}
	msg := fmt.Sprintf("%s is empty: %s", raw, strings.Join(why, "; "))
	if strings.Contains(raw, "{env.") {
		// the running process keeps the environment it started with
		msg += " (Caddy reads its environment when it starts: export the variable before `caddy run`/`caddy start`; a `caddy reload` does not see variables exported later, {file.…} is read again on every load)"
	}
	return msg
}

// unwrapPathError drops the path from an *os.PathError (already named).
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// LiteralWarning is logged, with the field's name, for every secret
// written into a config as a literal: accepted, because Caddy keeps the
// loaded config as it is (the admin endpoint's /config/ and autosave.json
// show it in clear), while {env.…} and {file.…} keep only the placeholder.
const LiteralWarning = "secret written into the config: Caddy's admin endpoint (/config/) and autosave.json show it in clear; use {env.NAME} or {file./path} instead"

// IsLiteral reports whether s is a secret written as is (not empty, no
// placeholder).
func IsLiteral(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && !HasPlaceholder(s)
}

// MinLength is the shortest secret accepted (a token, a signing key).
const MinLength = 32

// CheckStrength refuses a secret shorter than MinLength or with fewer
// than 8 distinct characters; the error never shows the secret.
func CheckStrength(s string) error {
	switch {
	case len(s) < MinLength:
		return fmt.Errorf("too short (%d characters); use at least %d, e.g. `openssl rand -hex 32`", len(s), MinLength)
	case distinctBytes(s) < 8:
		return fmt.Errorf("too weak (fewer than 8 distinct characters); use a random value, e.g. `openssl rand -hex 32`")
	}
	return nil
}

// distinctBytes counts the different bytes in s.
func distinctBytes(s string) int {
	var seen [256]bool
	n := 0
	for i := 0; i < len(s); i++ {
		if !seen[s[i]] {
			seen[s[i]] = true
			n++
		}
	}
	return n
}
