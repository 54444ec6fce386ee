// Package caddyhook is the `hooks` HTTP handler for Caddy
// (http.handlers.hooks): a hardened public webhook ingress in front of a
// local AI-agent gateway. It authenticates requests by hook token or a
// provider's signature, locks out addresses that keep failing, validates
// and routes `{path}/wake`, `{path}/agent` and mapped `{path}/<name>`
// requests (templates, CEL, sandboxed transforms), and dispatches the
// resulting actions to the gateway synchronously or through a durable
// spool (local, or a cluster engine's replicated queue). It also registers
// the admin API (admin.api.hooks), the `caddy hooks …` commands and the
// hooks app that checks the listeners.
//
// The request path lives in this package, one concern per file; the data
// structures and tools that need nothing of the handler are leaf packages
// under internal/ (lockout, idempotency, boundary, adminapi, cli, …). See
// ARCHITECTURE.md for the map, and the Handler's doc for the Caddyfile
// syntax, the placeholders and the event.
package caddyhook
