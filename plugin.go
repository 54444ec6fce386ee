// Package caddyhook lets xcaddy build Caddy with the hooks module from the
// module root:
//
//	xcaddy build --with github.com/caddyhook/caddyhook@v0.0.0=.   # from a clone (see docs/install.md)
//	xcaddy build --with github.com/caddyhook/caddyhook     # published
//
// The module itself is in the caddyhook subpackage.
package caddyhook

import _ "github.com/caddyhook/caddyhook/caddyhook" // registers http.handlers.hooks
