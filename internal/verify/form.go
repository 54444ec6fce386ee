package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/caddyhook/caddyhook/internal/jsonenc"
)

// Form limits.
const (
	// MaxFormFields bounds the fields of a form body (Twilio sends about
	// 40, Slack about 15).
	MaxFormFields = 1000
	// MaxFormKeyLen bounds a field name.
	MaxFormKeyLen = 256
)

// Form is a parsed application/x-www-form-urlencoded body: field names in
// the order they first appear, each with its values in order.
type Form struct {
	keys []string
	vals [][]string
}

// FormError is a form body that does not parse; Reason names the fault,
// never the content.
type FormError struct{ Reason string }

// Error implements error.
func (e *FormError) Error() string { return "form body: " + e.Reason }

// ParseForm parses body as application/x-www-form-urlencoded: fields
// separated by '&' (';' is data), names and values percent-decoded with
// '+' as a space. An empty body is an empty form. It fails with a
// *FormError on a bad escape, a field without a name, more than
// MaxFormFields fields, a name longer than MaxFormKeyLen or a name that is
// not UTF-8 (two such names would become one JSON member).
func ParseForm(body []byte) (*Form, error) {
	f := &Form{}
	fields := 0
	for len(body) > 0 {
		var field []byte
		if i := bytes.IndexByte(body, '&'); i >= 0 {
			field, body = body[:i], body[i+1:]
		} else {
			field, body = body, nil
		}
		if len(field) == 0 {
			continue
		}
		if fields++; fields > MaxFormFields {
			return nil, &FormError{fmt.Sprintf("more than %d fields", MaxFormFields)}
		}
		rawKey, rawVal := field, []byte(nil)
		if i := bytes.IndexByte(field, '='); i >= 0 {
			rawKey, rawVal = field[:i], field[i+1:]
		}
		key, ok := formUnescape(rawKey)
		if !ok {
			return nil, &FormError{"bad percent-escape in a field name"}
		}
		switch {
		case key == "":
			return nil, &FormError{"field without a name"}
		case len(key) > MaxFormKeyLen:
			return nil, &FormError{fmt.Sprintf("field name longer than %d bytes", MaxFormKeyLen)}
		case !utf8.ValidString(key):
			return nil, &FormError{"field name is not UTF-8"}
		}
		val, ok := formUnescape(rawVal)
		if !ok {
			return nil, &FormError{"bad percent-escape in a field value"}
		}
		f.add(key, val)
	}
	return f, nil
}

// add appends val to key's values.
func (f *Form) add(key, val string) {
	if i := slices.Index(f.keys, key); i >= 0 {
		f.vals[i] = append(f.vals[i], val)
		return
	}
	f.keys = append(f.keys, key)
	f.vals = append(f.vals, []string{val})
}

// Get returns the first value of key, "" when absent.
func (f *Form) Get(key string) string {
	if f == nil {
		return ""
	}
	if i := slices.Index(f.keys, key); i >= 0 {
		return f.vals[i][0]
	}
	return ""
}

// Values returns every value of key in order.
func (f *Form) Values(key string) []string {
	if f == nil {
		return nil
	}
	if i := slices.Index(f.keys, key); i >= 0 {
		return f.vals[i]
	}
	return nil
}

// Keys returns the field names in order of first appearance.
func (f *Form) Keys() []string {
	if f == nil {
		return nil
	}
	return slices.Clone(f.keys)
}

// JSON encodes the form as the one JSON object a mapping sees and forward
// mode sends: each field becomes a member in order of first appearance;
// a field sent once is a string, a field sent several times an array of
// strings (as the value of a repeated field would otherwise be lost); a
// field named in jsonFields whose (single) value is a JSON object or array
// is embedded as that JSON (Slack's payload=, Mandrill's
// mandrill_events=). Invalid UTF-8 in a value becomes U+FFFD.
func (f *Form) JSON(jsonFields ...string) []byte {
	out := []byte{'{'}
	for i, k := range f.keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonenc.AppendString(out, k)
		out = append(out, ':')
		vs := f.vals[i]
		switch {
		case len(vs) == 1 && slices.Contains(jsonFields, k) && isJSONContainer(vs[0]):
			out = append(out, vs[0]...)
		case len(vs) == 1:
			out = jsonenc.AppendString(out, vs[0])
		default:
			out = append(out, '[')
			for j, v := range vs {
				if j > 0 {
					out = append(out, ',')
				}
				out = jsonenc.AppendString(out, v)
			}
			out = append(out, ']')
		}
	}
	return append(out, '}')
}

// isJSONContainer reports whether s is one valid JSON object or array.
func isJSONContainer(s string) bool {
	t := trimJSONSpace(s)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(s))
}

// trimJSONSpace trims JSON whitespace from s.
func trimJSONSpace(s string) string {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// sortedPairs appends, for every distinct name in byte order, the name
// followed by each of its distinct values in byte order: the parameter
// string Twilio and Mandrill sign after the URL (as their reference
// validators build it, which deduplicate repeated pairs).
func (f *Form) sortedPairs(dst []byte) []byte {
	idx := make([]int, len(f.keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case f.keys[a] < f.keys[b]:
			return -1
		case f.keys[a] > f.keys[b]:
			return 1
		}
		return 0
	})
	for _, i := range idx {
		vals := slices.Clone(f.vals[i])
		slices.Sort(vals)
		vals = slices.Compact(vals)
		for _, v := range vals {
			dst = append(dst, f.keys[i]...)
			dst = append(dst, v...)
		}
	}
	return dst
}

// formUnescape percent-decodes s with '+' as a space.
func formUnescape(s []byte) (string, bool) {
	n := 0
	plus := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '%':
			if i+2 >= len(s) {
				return "", false
			}
			if _, ok := unhex(s[i+1]); !ok {
				return "", false
			}
			if _, ok := unhex(s[i+2]); !ok {
				return "", false
			}
			n++
			i += 2
		case '+':
			plus = true
		}
	}
	if n == 0 && !plus {
		return string(s), true
	}
	out := make([]byte, 0, len(s)-2*n)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			hi, _ := unhex(s[i+1])
			lo, _ := unhex(s[i+2])
			out = append(out, hi<<4|lo)
			i += 2
		case '+':
			out = append(out, ' ')
		default:
			out = append(out, c)
		}
	}
	return string(out), true
}
