package verify

import (
	"errors"
	"fmt"
	"strings"
)

// maxLayoutLen bounds Config.Layout.
const maxLayoutLen = 256

// segmentKind says what one piece of a layout contributes.
type segmentKind int

// Layout segment kinds.
const (
	segLiteral   segmentKind = iota // fixed text
	segBody                         // {body}: the raw request body
	segTimestamp                    // {timestamp}: the timestamp header value
	segID                           // {id}: the delivery id header value
)

// segment is one piece of a parsed layout.
type segment struct {
	kind    segmentKind
	literal []byte // for segLiteral
}

// layout is a parsed signed-content template.
type layout struct {
	segs         []segment
	hasTimestamp bool
	hasID        bool
}

// placeholderKind returns the kind of the layout placeholder {name}.
func placeholderKind(name string) (segmentKind, bool) {
	switch name {
	case "body":
		return segBody, true
	case "timestamp":
		return segTimestamp, true
	case "id":
		return segID, true
	}
	return 0, false
}

// parseLayout parses s: literal text with {body} exactly once and
// {timestamp} and {id} at most once each. "{" and "}" may appear only as
// placeholder delimiters.
func parseLayout(s string) (layout, error) {
	if len(s) > maxLayoutLen {
		return layout{}, fmt.Errorf("layout: longer than %d bytes", maxLayoutLen)
	}
	var (
		l    layout
		seen = map[segmentKind]bool{}
	)
	for s != "" {
		open := strings.IndexAny(s, "{}")
		if open < 0 {
			l.segs = append(l.segs, segment{kind: segLiteral, literal: []byte(s)})
			break
		}
		if open > 0 {
			l.segs = append(l.segs, segment{kind: segLiteral, literal: []byte(s[:open])})
		}
		if s[open] == '}' {
			return layout{}, errors.New(`layout: "}" without a matching "{"`)
		}
		end := strings.IndexAny(s[open+1:], "{}")
		if end < 0 || s[open+1+end] != '}' {
			return layout{}, errors.New(`layout: "{" without a matching "}"`)
		}
		name := s[open+1 : open+1+end]
		kind, ok := placeholderKind(name)
		if !ok {
			return layout{}, fmt.Errorf("layout: unknown placeholder {%s} (want {body}, {timestamp} or {id})", name)
		}
		if seen[kind] {
			return layout{}, fmt.Errorf("layout: {%s} appears more than once", name)
		}
		seen[kind] = true
		l.segs = append(l.segs, segment{kind: kind})
		s = s[open+2+end:]
	}
	if !seen[segBody] {
		return layout{}, errors.New("layout: must contain {body}")
	}
	l.hasTimestamp, l.hasID = seen[segTimestamp], seen[segID]
	return l, nil
}
