// Package caddyhook lets xcaddy build Caddy with the hooks module from the
// module root:
//
//	xcaddy build --with github.com/caddyhook/caddyhook=.   # from a clone
//	xcaddy build --with github.com/caddyhook/caddyhook     # published
//
// The module itself is in the caddyhook subpackage.
package caddyhook

import _ "github.com/caddyhook/caddyhook/caddyhook" // registers http.handlers.hooks
