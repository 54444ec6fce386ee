package verify

import (
	"errors"
	"net/http"
	"time"
)

// builder carries what a provider's build function reads.
type builder struct {
	cfg Config
	p   *Provider
	env Env
}

// tolerance returns the configured tolerance, else the provider's default,
// else DefaultTolerance.
func (b *builder) tolerance() (time.Duration, error) {
	switch {
	case b.cfg.Tolerance < 0:
		return 0, errors.New("tolerance: must not be negative")
	case b.cfg.Tolerance > 0:
		return b.cfg.Tolerance, nil
	case b.p.Tolerance > 0:
		return b.p.Tolerance, nil
	}
	return DefaultTolerance, nil
}

// macSet decodes the secrets per dec and prepares their keyed hashes.
func (b *builder) macSet(alg algorithm, dec keyDecode) (*macSet, error) {
	keys, err := decodeSecrets(b.cfg.Secrets, dec)
	if err != nil {
		return nil, err
	}
	return newMACSet(alg, keys), nil
}

// httpClient returns the host's client, or one with a 10 s timeout that
// follows no redirect (an allow-listed host could otherwise redirect
// anywhere).
func (b *builder) httpClient() *http.Client {
	if b.env.HTTPClient != nil {
		return b.env.HTTPClient
	}
	return &http.Client{
		Timeout:       fetchTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
