package verify

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// whsecPrefix marks a Standard Webhooks secret (base64 key follows).
const whsecPrefix = "whsec_"

// keyDecode is how a configured secret becomes a key.
type keyDecode int

// Secret decodings.
const (
	keyRaw    keyDecode = iota // the trimmed bytes
	keyWhsec                   // base64 after an optional whsec_ prefix (Standard Webhooks)
	keyBase64                  // standard base64 (Airtable, Microsoft Teams)
)

// decodeSecrets checks secrets and returns their keys, decoded per dec.
// Errors name the index, never the value.
func decodeSecrets(secrets []string, dec keyDecode) ([][]byte, error) {
	switch {
	case len(secrets) == 0:
		return nil, errors.New("secrets: at least one secret is required")
	case len(secrets) > MaxSecrets:
		return nil, fmt.Errorf("secrets: at most %d allowed", MaxSecrets)
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			return nil, fmt.Errorf("secrets[%d]: empty (is its placeholder's variable set?)", i)
		case IsSecretPlaceholder(s):
			return nil, fmt.Errorf("secrets[%d]: placeholder was not expanded", i)
		case s == redacted:
			return nil, fmt.Errorf("secrets[%d]: is the redaction marker %s (a config read back from Caddy never shows a literal secret); use a placeholder such as {env.NAME}", i, redacted)
		}
		key := []byte(s)
		var err error
		switch dec {
		case keyWhsec:
			key, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(s, whsecPrefix))
			if err != nil {
				return nil, fmt.Errorf("secrets[%d]: not valid base64 after the optional %s prefix", i, whsecPrefix)
			}
		case keyBase64:
			key, err = base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, fmt.Errorf("secrets[%d]: not valid base64", i)
			}
		case keyRaw: // the secret's bytes as written
		}
		if len(key) < MinSecretLen {
			return nil, fmt.Errorf("secrets[%d]: shorter than %d bytes", i, MinSecretLen)
		}
		keys[i] = key
	}
	return keys, nil
}
