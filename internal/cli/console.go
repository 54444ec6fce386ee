package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddyhook/caddyhook/internal/adminapi"
)

// newConsoleCommand builds `caddy hooks console`.
func newConsoleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "console [--listen 127.0.0.1:0]",
		Short: "Opens the console of the running hooks handlers in a browser, through the admin API",
		Long: `
Serves the console of Caddy's admin API (/hooks/console) to a browser on this
machine. Caddy's admin endpoint refuses a browser's requests that carry no Origin
(a page opened by typing its address), so this command relays them: it listens on
a loopback address, under a random path that only the printed URL knows, and passes
the console's requests to the admin API (found as "caddy reload" finds it:
--address, else the admin address of --config or ./Caddyfile, else
localhost:2019) with the admin endpoint's own origin. State-changing requests must
come from the console's page itself (same origin). Stop it with Ctrl-C.

For a console on a site behind Caddy's own authentication, use the hooks_console
handler instead.
`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ac, _, err := adminapi.FromFlags(cmd.Flags())
			if err != nil {
				return err
			}
			listen, _ := cmd.Flags().GetString("listen")
			ln, err := consoleListener(listen)
			if err != nil {
				return err
			}
			prefix := "/" + randomHex(16)
			srv := &http.Server{Handler: newConsoleProxy(ac, prefix, ln.Addr().String()), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "hooks console: http://%s%s/hooks/console/\n", ln.Addr(), prefix)
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			go func() { <-ctx.Done(); _ = srv.Close() }()
			if err := srv.Serve(ln); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.String("listen", "127.0.0.1:0", "Loopback address to serve the console on")
	adminapi.AddFlags(fl)
	return cmd
}

// consoleListener listens on a loopback address only.
func consoleListener(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: %v", addr, err)
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		if host != "localhost" {
			return nil, fmt.Errorf("--listen %q: the console relay listens on loopback only (127.0.0.1, ::1)", addr)
		}
	}
	return net.Listen("tcp", addr)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newConsoleProxy relays prefix + /hooks/… to the admin API's /hooks/…,
// as the admin client (with its Origin), and nothing else. The browser's
// request must be addressed to host (no DNS rebinding), and a
// state-changing one must come from the same origin.
func newConsoleProxy(ac *adminapi.Client, prefix, host string) http.Handler {
	target, _ := url.Parse(ac.Origin())
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, prefix)
			pr.Out.URL.RawPath = ""
			pr.Out.Host = target.Host
			for _, h := range []string{"Origin", "Referer", "Cookie", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User"} {
				pr.Out.Header.Del(h)
			}
			ac.SetHeaders(pr.Out.Header)
		},
		Transport:     ac.Transport(),
		FlushInterval: -1, // the live tail
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "admin API: "+err.Error(), http.StatusBadGateway)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !strings.EqualFold(r.Host, host):
			http.Error(w, "wrong host", http.StatusForbidden)
		case r.URL.Path == prefix || r.URL.Path == prefix+"/":
			http.Redirect(w, r, prefix+"/hooks/console/", http.StatusFound)
		case !strings.HasPrefix(r.URL.Path, prefix+adminapi.Prefix):
			http.NotFound(w, r)
		case r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r, host):
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
		default:
			rp.ServeHTTP(w, r)
		}
	})
}

// sameOrigin reports whether a browser says r comes from http://host.
func sameOrigin(r *http.Request, host string) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	o := r.Header.Get("Origin")
	return o != "" && strings.EqualFold(o, "http://"+host)
}
