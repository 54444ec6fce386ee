package caddyhook

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// consoleFiles are the console's page, script, style sheet and icon:
// plain files, no build step, nothing loaded from elsewhere.
//
//go:embed console
var consoleFiles embed.FS

// consoleIndex is the page, with the API's base and the CSRF token filled in.
var consoleIndex = template.Must(template.ParseFS(consoleFiles, "console/index.html"))

// consoleAssets maps the asset names to their content types.
var consoleAssets = map[string]string{
	"console.js":  "text/javascript; charset=utf-8",
	"console.css": "text/css; charset=utf-8",
	"favicon.svg": "image/svg+xml",
}

// consoleCSP is the console's Content-Security-Policy: its own files
// only, no inline script or style, no frames, no forms posted anywhere.
const consoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleMount tells the two places the console is served apart.
type consoleMount struct {
	api  string // the API's base, relative to the page
	csrf string // the token state-changing requests carry ("" on the admin endpoint)
}

// consoleOnAdmin is the console at /hooks/console/ on the admin endpoint,
// whose own origin checks guard the state-changing requests.
var consoleOnAdmin = consoleMount{api: "../"}

// serveConsole serves the page (asset "") or one of its files.
func serveConsole(w http.ResponseWriter, r *http.Request, m consoleMount, asset string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return apiError(http.StatusMethodNotAllowed, "%s %s: method not allowed (use GET)", r.Method, r.URL.Path)
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", consoleCSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin") // the admin endpoint checks the Referer of the page's requests
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-store")
	if asset == "" || asset == "index.html" {
		if !strings.HasSuffix(r.URL.Path, "/") {
			// the page's links are relative to its directory
			http.Redirect(w, r, consoleDirURL(r), http.StatusFound)
			return nil
		}
		var b bytes.Buffer
		if err := consoleIndex.Execute(&b, struct{ API, CSRF string }{m.api, m.csrf}); err != nil {
			return apiError(http.StatusInternalServerError, "console page: %v", err)
		}
		hd.Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(b.Bytes())
		return nil
	}
	ct, ok := consoleAssets[asset]
	if !ok {
		return apiError(http.StatusNotFound, "no such console file: %s", asset)
	}
	data, err := consoleFiles.ReadFile("console/" + asset)
	if err != nil {
		return apiError(http.StatusInternalServerError, "console file: %v", err)
	}
	hd.Set("Content-Type", ct)
	_, _ = w.Write(data)
	return nil
}

// consoleDirURL is the page's URL with a trailing slash, as the client
// asked for it (before any handle_path stripped a prefix). It is always a
// path on this site: leading slashes are folded into one, so that a page
// mounted at the site root, asked for as //evil.example, is not sent to
// //evil.example/, which a browser reads as another host.
func consoleDirURL(r *http.Request) string {
	u := r.URL
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		u = orig.URL
	}
	p := "/"
	if rest := strings.TrimLeft(u.Path, "/"); rest != "" {
		p += rest + "/"
	}
	return (&url.URL{Path: p, RawQuery: u.RawQuery}).String()
}
