package caddyhook

import (
	"time"

	"github.com/caddyhook/caddyhook/internal/idempotency"
)

// provisionIdempotency loads (or creates) the idempotency cache of this
// handler's identity and TTL.
func (h *Handler) provisionIdempotency(identity string) error {
	ttl := time.Duration(h.IdempotencyTTL)
	key := idempotencyPoolPrefix + identity + "|" + ttl.String()
	c, _, err := hold(&h.held, key, func() (*idempotency.Cache, error) { return idempotency.New(ttl), nil })
	h.idem = c
	return err
}
