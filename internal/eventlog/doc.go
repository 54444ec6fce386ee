// Package eventlog is the bounded log of what a hooks handler answered:
// the accepted events one by one, each with its dispatch outcome as it
// evolves (sent, queued, delivered, dead, …), and the rejected requests
// aggregated per client address, status and reason per minute, so that a
// flood of refusals is a few rows and never evicts an accepted event. It
// also keeps per-10-second rates of the last hour for the console's
// charts, a change journal that live tails (Server-Sent Events) follow,
// and, with a directory, a bbolt copy of the events that survives a
// restart.
//
// The package knows nothing of HTTP handlers: the caller decides what an
// event holds (it must never hand over a token or a signature value) and
// records it; the log bounds it by count, bytes and age. The log is shared
// across config reloads by its users (a caddy.UsagePool): each config
// registers its bounds, and the oldest registration's apply, so a reload
// Caddy refuses changes nothing.
package eventlog
