package httpapi

import (
	"reflect"
	"sync"

	"github.com/danielgtaylor/huma/v2"
)

// nilSlices keeps, for every response, the document's promise that an array tagged
// nullable:"false" is never null: such a field a handler left nil goes out as [], however deep
// in the body it sits, and so does a body that is a nil slice (a body is never null). One
// response transformer holds the rule, rather than a make() in each handler (the one missed
// answered "required_vars": null).
type nilSlices struct {
	reaches sync.Map // reflect.Type → bool: whether a value of the type can hold such a field
}

func newNilSlices() *nilSlices { return &nilSlices{} }

// transform is the Huma response transformer.
func (n *nilSlices) transform(_ huma.Context, _ string, v any) (any, error) {
	return n.apply(v), nil
}

// apply is v with its promised arrays filled: a copy where it can hold one, v itself otherwise.
func (n *nilSlices) apply(v any) any {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return v
	}
	if rv.Kind() == reflect.Slice && rv.IsNil() && rv.Type().Elem().Kind() != reflect.Uint8 {
		return reflect.MakeSlice(rv.Type(), 0, 0).Interface()
	}
	if !n.canHold(rv.Type()) {
		return v
	}
	cp := reflect.New(rv.Type()).Elem()
	cp.Set(rv)
	n.fill(cp)
	return cp.Interface()
}

// promised reports whether f is a slice the document says is never null.
func promised(f reflect.StructField) bool {
	return f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() != reflect.Uint8 && f.Tag.Get("nullable") == "false"
}

// fill sets the promised nil slices under v, an addressable value. What v points to or holds
// (a pointer's target, a slice's elements, a map's values) may be shared with other responses
// or a cache, so it is filled in a copy that v then refers to: nothing a handler handed over is
// written.
func (n *nilSlices) fill(v reflect.Value) {
	if !n.canHold(v.Type()) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			e := reflect.New(v.Type().Elem())
			e.Elem().Set(v.Elem())
			n.fill(e.Elem())
			v.Set(e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f, fv := v.Type().Field(i), v.Field(i)
			if !fv.CanSet() {
				continue
			}
			if promised(f) && fv.IsNil() {
				fv.Set(reflect.MakeSlice(f.Type, 0, 0))
				continue
			}
			n.fill(fv)
		}
	case reflect.Array:
		for i := range v.Len() {
			n.fill(v.Index(i))
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		for i := range c.Len() {
			n.fill(c.Index(i))
		}
		v.Set(c)
	case reflect.Map:
		if v.IsNil() {
			return
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			e := reflect.New(it.Value().Type()).Elem()
			e.Set(it.Value())
			n.fill(e)
			c.SetMapIndex(it.Key(), e)
		}
		v.Set(c)
	}
}

// canHold reports, once per type, whether a value of t can hold a promised slice: most bodies
// (events, logs, traces) cannot, and are not walked.
func (n *nilSlices) canHold(t reflect.Type) bool {
	if r, ok := n.reaches.Load(t); ok {
		return r.(bool)
	}
	r := holds(t, map[reflect.Type]bool{})
	n.reaches.Store(t, r)
	return r
}

// holds is canHold's search, seen guarding against recursive types.
func holds(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return holds(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if (f.IsExported() || f.Anonymous) && (promised(f) || holds(f.Type, seen)) {
				return true
			}
		}
	}
	return false
}
