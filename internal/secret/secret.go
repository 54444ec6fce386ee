// Package secret expands the secrets of a config ({env.NAME} and
// {file.PATH} placeholders) and says precisely why a required one is empty:
// which variable is unset or empty in Caddy's environment, which file is
// missing or empty. Every secret of caddyhook (hook tokens, gateway token,
// signing secrets, the cluster engine's credentials) goes through it, so a
// missing secret fails provision (and `caddy validate`) naming the field
// and the placeholder.
package secret

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// placeholder matches the {env.NAME} and {file.PATH} placeholders of a secret.
var placeholder = regexp.MustCompile(`\{(env|file)\.([^{}]+)\}`)

// HasPlaceholder reports whether s holds an {env.…} or {file.…} placeholder.
func HasPlaceholder(s string) bool { return placeholder.MatchString(s) }

// Expand returns raw with its placeholders expanded (unknown ones become
// empty), surrounding white space trimmed.
func Expand(raw string) string {
	return strings.TrimSpace(caddy.NewReplacer().ReplaceKnown(raw, ""))
}

// Required expands raw, a secret the field requires when it is set: it
// returns the value, or an error naming the field and why it is empty.
// An unset raw is no error (the field is optional); callers that require
// the field check for "" themselves.
func Required(field, raw string) (string, error) {
	if strings.TrimSpace(raw) == "" {
		return "", nil
	}
	if v := Expand(raw); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%s: %s", field, WhyEmpty(raw, ""))
}

// WhyEmpty says why a required secret expanded to nothing: which
// environment variable is unset or empty in Caddy's environment, or which
// file is missing or empty. example shows how to set it when raw is empty.
func WhyEmpty(raw, example string) string {
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
