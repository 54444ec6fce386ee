// Command caddy is Caddy with its standard modules plus caddyhook, so
// `go run ./cmd/caddy` needs no xcaddy.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddyhook/caddyhook/caddyhook"
)

func main() { caddycmd.Main() }
