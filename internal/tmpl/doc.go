// Package tmpl compiles and renders the `{{ }}` templates of hook mappings and
// the CEL expressions used by `match_expr` and `{{ cel: <expr> }}`
// placeholders.
//
// # Template grammar
//
// A template is literal text with placeholders `{{ expr }}`. Whitespace around
// expr is ignored. expr is one of:
//
//	path               the hook sub-path
//	now                the request time, UTC, millisecond precision (2026-11-22T18:33:35.123Z)
//	event              the event name the mapping's provider gave (Vars.Event, set
//	                   by a verify block); without one, the payload member event
//	headers.<name>     a request header; name is matched lower-cased
//	query.<name>       the first value of a query parameter
//	payload.<path>     a value in the JSON payload
//	<path>             the same, for any other expression (e.g. messages[0].subject)
//	cel: <expression>  a CEL expression (needs an [Env])
//
// A path is split into segments on '.', '[' and ']'; empty segments are
// skipped, so `a[0].b`, `a.0.b` and `a[0]b` name the same value. A segment
// that is a canonical non-negative decimal integer ("0", "17", not "01")
// indexes an array; on an object every segment, digits included, is a key.
// Nothing else resolves: arrays and strings have no `length`. A path with a
// segment equal to `__proto__`, `prototype` or `constructor` never resolves,
// and neither does a header or query name equal to one of them.
//
// A missing value renders as the empty string, as does JSON null. Strings
// render as-is, numbers as JavaScript's String(n) does, booleans as
// true/false, arrays and objects as compact JSON like JSON.stringify (no HTML
// escaping; U+2028 and U+2029 are not escaped; invalid UTF-8 becomes U+FFFD).
// Object keys are written in sorted (byte-wise) order, because a decoded Go
// map keeps no order.
//
// Parsing is stricter than the reference gateway's regular expression, which
// silently leaves a malformed placeholder in the output as literal text: here
// an unterminated `{{`, an empty placeholder, a stray `}` inside a placeholder
// or an empty header, query or payload path fails [Compile] with the 1-based
// line and column of the fault. A value is never re-scanned, so payload
// content cannot inject placeholders.
//
// # CEL
//
// Expressions see the variables payload (dyn: the decoded JSON body, numbers
// are doubles), headers (map(string, string), lower-cased names), query
// (map(string, string), first values), path (string), now (timestamp) and
// event (string: the provider's event name, "" when none).
// The environment adds CEL's optional types (`payload.?a.orValue("")`), the
// strings extension and cross-type numeric comparisons (`payload.n > 3`).
// Every evaluation (a match, or one placeholder of one render) is bounded by
// the environment's cost limit; size() of a string is charged by its
// length, which CEL's own model leaves constant. An evaluation
// failure is an [*EvalError], whose message names only the kind of failure,
// never a payload value or the expression text (which may hold a literal an
// operator considers secret).
//
// A CEL value renders like the equivalent reference value: string as-is,
// int and uint in decimal, double as JavaScript prints numbers, bool, null
// as the empty string, lists and maps as JSON, timestamps like `now`,
// durations in CEL's string form ("1.5s"), bytes as standard base64 and an
// optional as its value (none: empty).
package tmpl
