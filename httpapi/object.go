package httpapi

import (
	"encoding/json"

	"github.com/danielgtaylor/huma/v2"
)

// object is a JSON object served under a field the spec calls an open "object" whose content
// the engine writes in a typed shape of its own (an event's data, an evaluation result): the
// value is encoded once, from its Go type, and the document keeps the spec's open object. Empty
// is served as null.
type object json.RawMessage

// objectOf encodes v, a typed value; a nil pointer is an empty object (null).
func objectOf[T any](v *T) object {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// MarshalJSON serves the object as it was encoded.
func (o object) MarshalJSON() ([]byte, error) {
	if len(o) == 0 {
		return []byte("null"), nil
	}
	return o, nil
}

// UnmarshalJSON keeps the JSON as it is (a client reading the API's answers).
func (o *object) UnmarshalJSON(b []byte) error {
	*o = append((*o)[:0], b...)
	return nil
}

// Schema is the spec's open object.
func (object) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeObject, AdditionalProperties: true}
}

// nonNilObject is data, or {} when there is none.
func nonNilObject(data json.RawMessage) object {
	if len(data) == 0 {
		return object(`{}`)
	}
	return object(data)
}
