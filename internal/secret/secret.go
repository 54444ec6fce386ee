// Package secret holds the rules every secret of a caddyhook config
// follows (hook tokens, the gateway token, a cluster's signing keys):
// written as {env.NAME} or {file.PATH} placeholders, expanded at
// provision, and when one expands to nothing the error says why.
package secret

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
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
	msg, env := emptyWhy(raw)
	if env {
		msg += envHint
	}
	return msg
}

// envHint follows a message about an {env.…} placeholder: the running
// process keeps the environment it started with.
const envHint = " (Caddy reads its environment when it starts: export the variable before `caddy run`/`caddy start`; a `caddy reload` does not see variables exported later, {file.…} is read again on every load)"

// emptyWhy says why raw expands to nothing ("<raw> is empty: <why>"),
// and whether an {env.…} placeholder is among the reasons.
func emptyWhy(raw string) (string, bool) {
	rs := reasons(raw)
	why := make([]string, 0, len(rs))
	for _, r := range rs {
		why = append(why, r.String())
	}
	if len(why) == 0 {
		return fmt.Sprintf("%s expands to nothing", raw), false
	}
	return fmt.Sprintf("%s is empty: %s", raw, strings.Join(why, "; ")), strings.Contains(raw, "{env.")
}

// reason is why one placeholder expands to nothing.
type reason struct {
	unset string // an environment variable that is not set
	text  string // otherwise
}

// String implements fmt.Stringer.
func (r reason) String() string {
	if r.unset != "" {
		return r.unset + " is not set in Caddy's environment"
	}
	return r.text
}

// reasons lists why each placeholder of raw expands to nothing (one that
// expands to something gives none).
func reasons(raw string) []reason {
	var why []reason
	for _, m := range placeholder.FindAllStringSubmatch(raw, -1) {
		switch name := m[2]; m[1] {
		case "env":
			if v, set := os.LookupEnv(name); !set {
				why = append(why, reason{unset: name})
			} else if strings.TrimSpace(v) == "" {
				why = append(why, reason{text: fmt.Sprintf("%s is empty in Caddy's environment", name)})
			}
		case "file":
			if _, err := os.Stat(name); err != nil {
				why = append(why, reason{text: fmt.Sprintf("file %s cannot be read (%v)", name, unwrapPathError(err))})
			} else if Expand(m[0]) == "" {
				why = append(why, reason{text: fmt.Sprintf("file %s is empty", name)})
			}
		}
	}
	return why
}

// Field is a value of a config that holds a secret, or a placeholder
// that must expand to something: its name as the errors show it, its raw
// value, and Each: every placeholder in it must expand to something (an
// address such as unix/{env.GATEWAY_SOCKET}), else the whole value must
// (a secret).
type Field struct {
	Name, Raw string
	Each      bool
}

// CheckSet reports, in one error, every field that is set but expands
// to nothing, each named with why (which variable is unset, which file
// is missing), so that a person fixes them all at once rather than one
// per `caddy validate`. One field reads as Empty's message; several are
// counted and joined by "; ", the environment's hint once at the end.
func CheckSet(fields []Field) error {
	type empty struct{ name, raw string }
	var bad []empty
	for _, f := range fields {
		raw := strings.TrimSpace(f.Raw)
		switch {
		case raw == "":
		case f.Each:
			for _, ph := range placeholder.FindAllString(raw, -1) {
				if Expand(ph) == "" {
					bad = append(bad, empty{f.Name, ph})
				}
			}
		case Expand(raw) == "":
			bad = append(bad, empty{f.Name, raw})
		}
	}
	if len(bad) == 0 {
		return nil
	}
	env := false
	var list, unset, other []string
	for _, b := range bad {
		list = append(list, b.name+": "+b.raw)
		env = env || strings.Contains(b.raw, "{env.")
		for _, r := range reasons(b.raw) {
			switch {
			case r.unset != "" && !slices.Contains(unset, r.unset):
				unset = append(unset, r.unset)
			case r.unset == "" && !slices.Contains(other, r.text):
				other = append(other, r.text)
			}
		}
	}
	var msg string
	if len(bad) == 1 {
		why, _ := emptyWhy(bad[0].raw)
		msg = bad[0].name + ": " + why
	} else {
		why := other
		switch len(unset) {
		case 0:
		case 1:
			why = append([]string{unset[0] + " is not set in Caddy's environment"}, why...)
		default:
			why = append([]string{strings.Join(unset[:len(unset)-1], ", ") + " and " + unset[len(unset)-1] + " are not set in Caddy's environment"}, why...)
		}
		msg = fmt.Sprintf("%d values are empty: %s; %s", len(bad), strings.Join(list, ", "), strings.Join(why, "; "))
	}
	if env {
		msg += envHint
	}
	return errors.New(msg)
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
