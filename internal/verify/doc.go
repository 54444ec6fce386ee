// Package verify checks webhook provider signatures on the raw request
// body: GitHub, Stripe, Slack, Standard Webhooks (and Svix) and a
// configurable generic HMAC scheme.
//
// A [Verifier] is built once from a [Config] by [New], which validates the
// configuration and decodes the secrets; [Verifier.Verify] then checks one
// request's headers and raw body. Every expected MAC is computed for every
// configured secret and compared with every candidate signature in constant
// time, so neither a mismatch nor the secret that matched is revealed by
// timing. Timestamps, where a scheme has them, must lie within the
// tolerance in both directions (stale and future).
//
// Verification failures are [*Error] values whose Reason is short and safe
// to log: no secret, no signature and no payload content ever appears in an
// error, a log line or a formatted or JSON-encoded Config or Verifier.
//
// Duplicate headers: a signature, timestamp or delivery-id header that is
// sent more than once is accepted only when every copy carries the same
// value; copies that differ are rejected ([ReasonDuplicateHeader]) rather
// than guessing which one the provider meant. Several signatures belong in
// one header value where the scheme allows it (Stripe's repeated v1=,
// Standard Webhooks' space-separated list), at most [MaxSignatures].
package verify
