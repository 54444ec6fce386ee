package verify

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// MaxEventLen is the longest event name returned; longer ones (or ones
// with bytes outside printable ASCII) are not returned.
const MaxEventLen = 128

// srcKind says where a delivery id or an event name is read.
type srcKind int

// Source kinds.
const (
	srcHeader   srcKind = iota + 1 // a request header
	srcJSON                        // a member of the (verified) JSON payload
	srcBodyHash                    // the hex SHA-256 of the raw body
	srcFunc                        // provider code
)

// source is one place a delivery id or event name is read.
type source struct {
	kind srcKind
	name string   // header name (canonical), or the description of a func
	path []string // JSON path
	fn   func(c *call) string
}

// sources lists where a value is read, first non-empty wins.
type sources []source

// fromHeader reads header name.
func fromHeader(name string) source {
	n, err := headerName("source", name)
	if err != nil {
		panic(err) // a provider file's constant
	}
	return source{kind: srcHeader, name: n}
}

// fromJSON reads the member at the dotted path of the JSON payload (a
// form body's fields, a decrypted body: what the mapping sees).
func fromJSON(path string) source {
	return source{kind: srcJSON, name: path, path: strings.Split(path, ".")}
}

// fromBodyHash is the xxHash64 of the raw body, in hex: a provider without
// a delivery id redelivers the same bytes. (Not a cryptographic hash: the
// body is provider-signed, so nobody else can pick it; 64 bits keep
// accidental collisions out of any idempotency window, at a tenth of a
// SHA-256 pass.)
func fromBodyHash() source { return source{kind: srcBodyHash} }

// fromFunc reads the value with fn, described by desc in the listing.
func fromFunc(desc string, fn func(c *call) string) source {
	return source{kind: srcFunc, name: desc, fn: fn}
}

// oneOf lists sources in order.
func oneOf(s ...source) sources { return s }

// raw reads the source's value, uncleaned.
func (s source) raw(c *call) string {
	switch s.kind {
	case srcHeader:
		v, err := headerValue(c.header(), s.name)
		if err != nil {
			return ""
		}
		return v
	case srcJSON:
		return jsonField(c.json(), s.path...)
	case srcBodyHash:
		return bodyHash(c.body())
	case srcFunc:
		return s.fn(c)
	}
	return ""
}

// String describes the source for the providers table.
func (s source) String() string {
	switch s.kind {
	case srcHeader:
		return "header " + s.name
	case srcJSON:
		return "body " + s.name
	case srcBodyHash:
		return "xxHash64 of the body"
	case srcFunc:
		return s.name
	}
	return ""
}

// deliveryID returns the first clean delivery id of ss.
func (ss sources) deliveryID(c *call) string {
	for _, s := range ss {
		if id := cleanID(s.raw(c)); id != "" {
			return id
		}
	}
	return ""
}

// event returns the first clean event name of ss.
func (ss sources) event(c *call) string {
	for _, s := range ss {
		if e := cleanEvent(s.raw(c)); e != "" {
			return e
		}
	}
	return ""
}

// String describes ss for the providers table.
func (ss sources) String() string {
	if len(ss) == 0 {
		return "—"
	}
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.String()
	}
	return strings.Join(parts, ", else ")
}

// cleanEvent returns e when it is 1 to MaxEventLen bytes of printable
// ASCII (spaces allowed inside, as GitLab's "Push Hook"), else "".
func cleanEvent(e string) string {
	e = strings.TrimSpace(e)
	if len(e) == 0 || len(e) > MaxEventLen {
		return ""
	}
	for i := 0; i < len(e); i++ {
		if e[i] < ' ' || e[i] > '~' {
			return ""
		}
	}
	return e
}

// bodyHash is the delivery id of a body: "xxh64-" and 16 hex digits.
func bodyHash(b []byte) string {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], xxhash.Sum64(b))
	return "xxh64-" + hex.EncodeToString(buf[:])
}

// joinEvent joins a resource and an action as "resource.action", or
// returns whichever is set.
func joinEvent(resource, action string) string {
	switch {
	case resource == "":
		return action
	case action == "":
		return resource
	}
	return resource + "." + action
}

// itoa formats a small non-negative integer.
func itoa(i int) string { return strconv.Itoa(i) }

// fromSignatureDigest is the hex SHA-256 of the signature header as sent:
// for a provider that signs the body but no time, a fingerprint of the
// body under the current secret that costs no second pass over the body.
// (A redelivery signed after a secret rotation gets another id.)
func fromSignatureDigest() source {
	return fromFunc("SHA-256 of the signature (a fingerprint of the body)", func(c *call) string {
		for _, h := range c.v.offered {
			if v, err := headerValue(c.header(), h); err == nil && v != "" {
				sum := sha256.Sum256([]byte(v))
				return hex.EncodeToString(sum[:])
			}
		}
		return ""
	})
}
