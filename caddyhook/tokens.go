package caddyhook

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/internal/secret"
	"github.com/caddyhook/caddyhook/internal/verify"
)

// maxTokens bounds the hook tokens of one handler (each costs one
// comparison per request).
const maxTokens = 8

// provisionTokens expands and checks the hook tokens and the token header
// aliases: every token at least 32 characters with 8 distinct ones, no two
// alike, none equal to the gateway token.
func (h *Handler) provisionTokens(repl *caddy.Replacer, gwToken string) error {
	raws := h.tokenValues()
	if len(raws) > maxTokens {
		return fmt.Errorf("token: at most %d tokens (have %d)", maxTokens, len(raws))
	}
	if len(raws) == 0 {
		raws = []string{""}
	}
	plain := make([]string, len(raws))
	h.tokens = make([]tokenDigest, len(raws))
	for i, raw := range raws {
		field := "token"
		if len(raws) > 1 {
			field = fmt.Sprintf("token %d of %d", i+1, len(raws))
		}
		t := strings.TrimSpace(repl.ReplaceKnown(raw, ""))
		if t == "" {
			return fmt.Errorf("%s: %s", field, secret.Empty(raw, "token {env.HOOK_TOKEN}"))
		}
		if err := checkToken(t, gwToken); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		for j := range i {
			if constantTimeEqual(t, plain[j]) {
				return fmt.Errorf("%s: the same as token %d; every token must be different", field, j+1)
			}
		}
		plain[i] = t
		h.tokens[i] = tokenDigest(sha256Sum(t))
	}
	h.tokenHeaders = []string{headerServiceToken}
	for _, name := range h.TokenHeaders {
		name = strings.TrimSpace(name)
		if !validHeaderName(name) {
			return fmt.Errorf("token_headers: %q is not a header name", name)
		}
		c := textproto.CanonicalMIMEHeaderKey(name)
		if c == "Authorization" || c == "Cookie" || c == "Host" || c == "Content-Type" {
			return fmt.Errorf("token_headers: %s cannot carry the hook token", c)
		}
		if !h.isTokenHeader(c) {
			h.tokenHeaders = append(h.tokenHeaders, c)
		}
	}
	return nil
}

// tokenValues lists the configured token values (placeholders unexpanded).
func (h *Handler) tokenValues() []string {
	var out []string
	if h.Token != "" {
		out = append(out, h.Token)
	}
	return append(out, h.Tokens...)
}

// checkToken refuses a weak or reused hook token.
func checkToken(token, gwToken string) error {
	if err := secret.CheckStrength(token); err != nil {
		return err
	}
	switch {
	case gwToken != "" && constantTimeEqual(token, gwToken):
		return fmt.Errorf("must differ from gateway_token (the hook token is dedicated)")
	}
	return nil
}

// isTokenHeader reports whether the canonical header name carries the hook
// token (Authorization aside): x-service-token or a token_headers alias.
// Such headers never reach templates, transforms, logs or the gateway.
func (h *Handler) isTokenHeader(canonical string) bool {
	for _, n := range h.tokenHeaders {
		if n == canonical {
			return true
		}
	}
	return false
}

// validHeaderName reports an RFC 9110 field name.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// warnLiteralSecrets logs, once per provision, every secret written into
// the config as a literal. One rule for all secrets, in a Caddyfile or
// JSON: a literal is accepted with this warning, because Caddy keeps the
// loaded config as it is (the admin endpoint's /config/ and autosave.json
// show it in clear), while {env.…} and {file.…} keep only the placeholder.
func (h *Handler) warnLiteralSecrets(logger *zap.Logger) {
	warn := func(field string) {
		logger.Warn(secret.LiteralWarning,
			zap.String("field", field))
	}
	for i, raw := range h.tokenValues() {
		if isLiteralSecret(raw) {
			if i == 0 {
				warn("token")
			} else {
				warn(fmt.Sprintf("token %d", i+1))
			}
		}
	}
	if isLiteralSecret(h.GatewayToken) {
		warn("gateway_token")
	}
	for _, m := range h.Mappings {
		if m.Verify == nil {
			continue
		}
		for j, s := range m.Verify.Secrets {
			if isLiteralSecret(s) {
				warn(fmt.Sprintf("mapping %s: verify secret %d", m.ID, j+1))
			}
		}
	}
}

// isLiteralSecret reports a non-empty secret that holds no placeholder.
func isLiteralSecret(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && !verify.IsSecretPlaceholder(s) && !secret.HasPlaceholder(s)
}

// tokenHeaderPresent reports whether r has any token header, even an empty
// one (a repeated header may carry the token in a later copy).
func (h *Handler) tokenHeaderPresent(r *http.Request) bool {
	for _, name := range h.tokenHeaders {
		if _, ok := r.Header[name]; ok {
			return true
		}
	}
	return false
}
