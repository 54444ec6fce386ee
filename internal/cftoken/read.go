// Package cftoken is the Caddyfile token codec of the hooks directive:
// how the directive reads a mapping template from a token (Caddy's
// placeholder shorthands undone, \n read as a newline), and the one token
// writer that `caddy hooks import` writes every value through (Token,
// Arg.Encode, Write), which checks that what it writes reads back as the
// value.
package cftoken

import (
	"regexp"
	"strings"

	"github.com/caddyhook/caddyhook/internal/tmpl"
)

// The Caddyfile adapter expands placeholder shorthands in every token
// before a directive sees it, so a mapping template written as
// `{{path}}` arrives as `{{http.request.uri.path}}` and `{{query.x}}` as
// `{{http.request.uri.query.x}}`. Inside `{{ }}` those can only have
// meant the template names, so RestoreShorthands undoes the expansion.
// (Writing `{{ path }}` with spaces avoids the expansion altogether.)

// shorthandExact maps Caddy's expansions of whole shorthands back.
var shorthandExact = map[string]string{
	"http.request.host": "host", "http.request.hostport": "hostport", "http.request.port": "port",
	"http.request.orig_method": "orig_method", "http.request.orig_uri": "orig_uri",
	"http.request.orig_uri.path": "orig_path", "http.request.orig_uri.path.dir": "orig_dir",
	"http.request.orig_uri.path.file": "orig_file", "http.request.orig_uri.query": "orig_query",
	"http.request.orig_uri.prefixed_query": "orig_?query", "http.request.method": "method",
	"http.request.uri": "uri", "http.request.uri_escaped": "%uri", "http.request.uri.path": "path",
	"http.request.uri.path_escaped": "%path", "http.request.uri.path.dir": "dir",
	"http.request.uri.path.file": "file", "http.request.uri.query": "query",
	"http.request.uri.query_escaped": "%query", "http.request.uri.prefixed_query": "?query",
	"http.request.remote": "remote", "http.request.remote.host": "remote_host",
	"http.request.remote.port": "remote_port", "http.request.scheme": "scheme", "http.request.uuid": "uuid",
	"http.request.tls.cipher_suite": "tls_cipher", "http.request.tls.version": "tls_version",
	"http.request.tls.client.fingerprint": "tls_client_fingerprint",
	"http.request.tls.client.issuer":      "tls_client_issuer", "http.request.tls.client.serial": "tls_client_serial",
	"http.request.tls.client.subject":                "tls_client_subject",
	"http.request.tls.client.certificate_pem":        "tls_client_certificate_pem",
	"http.request.tls.client.certificate_der_base64": "tls_client_certificate_der_base64",
	"http.reverse_proxy.upstream.hostport":           "upstream_hostport", "http.vars.client_ip": "client_ip",
}

// shorthandPrefixes maps Caddy's expansions of parameterised shorthands
// back, longest first.
var shorthandPrefixes = [][2]string{
	{"http.request.uri.path.file.", "file."},
	{"http.request.host.labels.", "labels."},
	{"http.request.uri.query.", "query."},
	{"http.request.uri.path.", "path."},
	{"http.request.header.", "header."},
	{"http.request.cookie.", "cookie."},
	{"http.matchers.file.", "file_match."},
	{"http.reverse_proxy.", "rp."},
	{"http.intercept.", "resp."},
	{"http.regexp.", "re."},
	{"http.error.", "err."},
	{"http.vars.", "vars."},
}

// tightPlaceholder is a template placeholder without inner spaces, the
// only form the shorthand expansion touches.
var tightPlaceholder = regexp.MustCompile(`\{\{(http\.[^{}\s]+)\}\}`)

// RestoreShorthands undoes the Caddyfile's shorthand expansion inside
// template placeholders.
func RestoreShorthands(s string) string {
	if !strings.Contains(s, "{{http.") {
		return s
	}
	return tightPlaceholder.ReplaceAllStringFunc(s, func(m string) string {
		inner := m[2 : len(m)-2]
		if short, ok := shorthandExact[inner]; ok {
			return "{{" + short + "}}"
		}
		for _, p := range shorthandPrefixes {
			if rest, ok := strings.CutPrefix(inner, p[0]); ok {
				return "{{" + p[1] + rest + "}}"
			}
		}
		return m
	})
}

// Newlines turns the two characters \n into a newline in the
// literal text of a template, so that a multi-line template fits on one
// Caddyfile line. Placeholders are copied unchanged: inside a CEL string
// literal \n is already an escape that CEL reads as a newline, while a raw
// newline there would end the literal.
func Newlines(s string) string {
	if !strings.Contains(s, `\n`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "{{"):
			end, _ := tmpl.Placeholder(s, i) // as the template engine reads it
			b.WriteString(s[i:end])
			i = end
		case strings.HasPrefix(s[i:], `\n`):
			b.WriteByte('\n')
			i += 2
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}
