package tmpl

import (
	"sync"
)

// partKind says what one compiled piece of a template renders.
type partKind uint8

const (
	partLiteral partKind = iota // text
	partMissing                 // a blocked name: renders nothing
	partPath                    // the hook sub-path
	partNow                     // the request time
	partHeader                  // Headers[text]
	partQuery                   // Query[text]
	partPayload                 // path in the payload
	partEvent                   // Vars.Event, else the payload's event member
	partCEL                     // a CEL program
)

// part is one compiled piece of a template.
type part struct {
	kind partKind
	text string   // literal text, or the header or query name
	path Path     // partPayload, partEvent
	prg  *program // partCEL
	line int      // partCEL: placeholder position, for *EvalError
	col  int
}

// maxPooledBuf bounds the render buffers a Template keeps for reuse.
const maxPooledBuf = 64 << 10

// Template is a compiled `{{ }}` template. It is safe for concurrent use
// and must not be copied.
type Template struct {
	src    string
	parts  []part
	static bool
	bufs   sync.Pool // *[]byte scratch for RenderString
}

// Render appends the rendered template to dst. On error (only a CEL
// placeholder can fail, with an *EvalError) it returns dst unchanged.
func (t *Template) Render(dst []byte, v *Vars) ([]byte, error) {
	mark := len(dst)
	for i := range t.parts {
		p := &t.parts[i]
		switch p.kind {
		case partLiteral:
			dst = append(dst, p.text...)
		case partPath:
			dst = append(dst, v.Path...)
		case partNow:
			dst = v.now().UTC().AppendFormat(dst, isoMillis)
		case partHeader:
			dst = append(dst, v.Headers[p.text]...)
		case partQuery:
			dst = append(dst, v.Query[p.text]...)
		case partEvent:
			if v.Event != "" {
				dst = append(dst, v.Event...)
				break
			}
			fallthrough
		case partPayload:
			if val, ok := p.path.lookupVars(v); ok {
				dst = AppendValue(dst, val)
			}
		case partCEL:
			var err error
			if dst, err = p.renderCEL(dst, v); err != nil {
				return dst[:mark], err
			}
		case partMissing: // a blocked name renders nothing
		}
	}
	return dst, nil
}

// renderCEL evaluates a CEL part and appends its value, at most the
// program's output bound of it.
func (p *part) renderCEL(dst []byte, v *Vars) ([]byte, error) {
	out, err := p.prg.eval(v)
	if err == nil {
		var b []byte
		if b, err = appendCEL(dst, out, false, len(dst)+p.prg.maxOutput); err == nil {
			return b, nil
		}
	}
	if ee, ok := err.(*EvalError); ok {
		ee.Line, ee.Column = p.line, p.col
	}
	return dst, err
}

// RenderString renders the template to a new string. A static template
// returns its text without allocating; otherwise the only allocation is the
// result, as long as the template has no CEL placeholder.
func (t *Template) RenderString(v *Vars) (string, error) {
	if t.static {
		if len(t.parts) == 0 {
			return "", nil
		}
		return t.parts[0].text, nil
	}
	bp, _ := t.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b, err := t.Render((*bp)[:0], v)
	s := string(b)
	if cap(b) <= maxPooledBuf {
		*bp = b
		t.bufs.Put(bp)
	}
	if err != nil {
		return "", err
	}
	return s, nil
}

// IsStatic reports whether the template has no placeholders, so that it
// always renders its own text.
func (t *Template) IsStatic() bool { return t.static }

// Source returns the template text as compiled.
func (t *Template) Source() string { return t.src }
