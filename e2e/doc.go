// Package e2e holds the end-to-end cases that run caddyhook, as a real
// Caddy process, in front of the real agent gateway (the openclaw npm
// package) on loopback.
//
// The cases are behind the build tag "openclaw" so that `go test ./...`
// stays hermetic:
//
//	.ci/openclaw.sh                                  # install or reuse Node 24 + openclaw
//	go test -tags openclaw -count=1 -v ./e2e/...
//
// The harness runs .ci/openclaw.sh itself unless CADDYHOOK_OPENCLAW_BIN
// (and optionally CADDYHOOK_NODE_BIN) name an existing installation.
package e2e
