package caddyhook

import (
	"regexp"
	"strings"
)

// The Caddyfile adapter expands placeholder shorthands in every token
// before a directive sees it, so a mapping template written as
// `{{path}}` arrives as `{{http.request.uri.path}}` and `{{query.x}}` as
// `{{http.request.uri.query.x}}`. Inside `{{ }}` those can only have
// meant the template names, so restoreShorthands undoes the expansion.
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

// restoreShorthands undoes the Caddyfile's shorthand expansion inside
// template placeholders.
func restoreShorthands(s string) string {
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
