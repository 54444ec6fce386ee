package tmpl

import (
	"maps"
	"reflect"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// elementMap is the payload as CEL sees it for one for_each element: the
// payload's own map, except that the element's key yields the element
// list. Lookups cost what they cost on the payload; only an operation on
// the whole map (rendering it, converting or comparing it) builds a
// shallow copy, whose cost is proportional to its output anyway.
type elementMap struct {
	traits.Mapper // the payload
	payload       map[string]any
	element       Element
	value         ref.Val // element.Value as CEL sees it
}

// newElementMap returns the CEL view of payload with el laid over it.
func newElementMap(payload map[string]any, el Element) *elementMap {
	return &elementMap{
		Mapper:  types.DefaultTypeAdapter.NativeToValue(payload).(traits.Mapper),
		payload: payload,
		element: el,
		value:   types.DefaultTypeAdapter.NativeToValue(el.Value),
	}
}

// isElementKey reports whether key is the element's key.
func (m *elementMap) isElementKey(key ref.Val) bool {
	s, ok := key.(types.String)
	return ok && string(s) == m.element.Key
}

// Find implements traits.Mapper.
func (m *elementMap) Find(key ref.Val) (ref.Val, bool) {
	if m.isElementKey(key) {
		return m.value, true
	}
	return m.Mapper.Find(key)
}

// Get implements traits.Indexer.
func (m *elementMap) Get(key ref.Val) ref.Val {
	if m.isElementKey(key) {
		return m.value
	}
	return m.Mapper.Get(key)
}

// Contains implements traits.Container.
func (m *elementMap) Contains(key ref.Val) ref.Val {
	if m.isElementKey(key) {
		return types.True
	}
	return m.Mapper.Contains(key)
}

// Size implements traits.Sizer.
func (m *elementMap) Size() ref.Val {
	if _, ok := m.payload[m.element.Key]; ok {
		return m.Mapper.Size()
	}
	return types.Int(len(m.payload) + 1)
}

// Iterator implements traits.Iterable.
func (m *elementMap) Iterator() traits.Iterator {
	if _, ok := m.payload[m.element.Key]; ok {
		return m.Mapper.Iterator()
	}
	return m.copy().Iterator()
}

// Value implements ref.Val: the shallow copy as a Go map.
func (m *elementMap) Value() any { return m.native() }

// ConvertToNative implements ref.Val.
func (m *elementMap) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return m.copy().ConvertToNative(typeDesc)
}

// ConvertToType implements ref.Val.
func (m *elementMap) ConvertToType(typeVal ref.Type) ref.Val { return m.copy().ConvertToType(typeVal) }

// Equal implements ref.Val.
func (m *elementMap) Equal(other ref.Val) ref.Val { return m.copy().Equal(other) }

// native is the shallow copy with the element laid over it.
func (m *elementMap) native() map[string]any {
	c := maps.Clone(m.payload)
	if c == nil {
		c = make(map[string]any, 1)
	}
	c[m.element.Key] = m.element.Value
	return c
}

// copy is native as a CEL map.
func (m *elementMap) copy() traits.Mapper {
	return types.DefaultTypeAdapter.NativeToValue(m.native()).(traits.Mapper)
}
