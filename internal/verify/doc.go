// Package verify authenticates webhook requests the way each sender signs
// them: a registry of providers (GitHub, Stripe, Slack, Shopify, Twilio,
// Discord, Meta, Amazon SNS, Google Pub/Sub, … and the configurable
// standard, hmac and token), each one entry in its own provider_<name>.go
// file with its test vectors in provider_<name>_test.go.
//
// A [Verifier] is built once from a [Config] by [New], which validates the
// configuration (errors name the field) and decodes the secrets and keys;
// then, per request:
//
//   - [Verifier.Handshake] answers the provider's endpoint handshake
//     (Meta's GET hub.challenge, Zoom's url_validation, Discord's PING,
//     Twitch's challenge, SNS's SubscriptionConfirmation, …): an [Answer]
//     to send, never to dispatch;
//   - [Verifier.VerifyRequest] authenticates a request and returns the
//     provider's delivery id, event name and, for form or encrypted
//     bodies, the JSON payload the mapping sees ([Result]).
//
// Families: HMAC over the raw body (and, per provider, a timestamp, the
// public URL, the sorted form fields), Standard Webhooks, static tokens,
// Ed25519, ECDSA P-256, RSA under an X.509 certificate fetched from an
// allow-listed host, and JWTs (HS256 under the secret; RS256/ES256 under a
// key set from a file or an allow-listed https URL). Every expected MAC is
// computed for every configured secret and compared with every candidate
// signature in constant time, so neither a mismatch nor the secret that
// matched is revealed by timing. Timestamps, where a scheme has them, must
// lie within the tolerance in both directions (stale and future).
//
// Fetches (certificates, key sets, SNS confirmations) go only to https
// URLs on allow-listed hosts, are bounded in time and size, and are cached:
// a cached key costs a map look-up, never a fetch.
//
// Verification failures are [*Error] values whose Reason is short and safe
// to log: no secret, no signature and no payload content ever appears in an
// error, a log line or a formatted or JSON-encoded Config or Verifier.
// A verified request whose body is unusable is a [*PayloadError] (400); a
// key that could not be fetched an [*UnavailableError] (503).
//
// Duplicate headers: a signature, timestamp or delivery-id header that is
// sent more than once is accepted only when every copy carries the same
// value; copies that differ are rejected ([ReasonDuplicateHeader]) rather
// than guessing which one the provider meant. Several signatures belong in
// one header value where the scheme allows it (Stripe's repeated v1=,
// Standard Webhooks' space-separated list), at most [MaxSignatures].
//
// [Providers] lists the registry and [MarkdownTable] renders it (the
// README's table, kept equal by a test); [Words] and [Config.SetWord] drive
// the Caddyfile's verify block.
package verify
