package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxJSONDepth bounds how deep a request body nests objects and arrays, the body itself being
// the first level. No typed input nests more than a few levels; the bound is for the open objects
// a client fills as it likes (a model's request_defaults, a task's or a rollout's args, agent
// config's own keys, checkpoint metrics, validation calls' arguments …), which are stored and
// served back, and which a decoder and every later reader walks recursively. encoding/json stops
// only at 10,000 levels.
const maxJSONDepth = 32

// maxKeyEcho bounds each key of a too-deep value's location.
const maxKeyEcho = 64

// jsonTooDeep is the location (body.a.b[2]) of the first object or array in a JSON text that
// opens deeper than max levels, or "" when none does. It is one pass over the bytes that reads
// only strings, brackets, commas and colons, and stops at the first too-deep value, so that a deep
// body costs no more than a flat one of its size; invalid JSON is left to the decoder.
func jsonTooDeep(b []byte, max int) string {
	type level struct {
		object    bool
		expectKey bool   // in an object, before the next key's colon
		key       []byte // an object's current key, as escaped in the text
		index     int    // an array's current index
	}
	stack := make([]level, 0, max)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '{', '[':
			if len(stack) == max {
				var loc strings.Builder
				loc.WriteString("body")
				for _, l := range stack {
					if l.object {
						loc.WriteString("." + jsonKey(l.key))
					} else {
						loc.WriteString("[" + strconv.Itoa(l.index) + "]")
					}
				}
				return loc.String()
			}
			stack = append(stack, level{object: c == '{', expectKey: c == '{'})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].expectKey = true
			} else if n > 0 {
				stack[n-1].index++
			}
		case ':':
			if n := len(stack); n > 0 {
				stack[n-1].expectKey = false
			}
		case '"':
			start := i + 1
			for i = start; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				stack[n-1].key = b[start:min(i, len(b))]
			}
		}
	}
	return ""
}

// jsonKey is a key as escaped in JSON text, unescaped and cut to maxKeyEcho bytes.
func jsonKey(raw []byte) string {
	k := string(raw)
	if bytes.IndexByte(raw, '\\') >= 0 {
		if err := json.Unmarshal([]byte(`"`+k+`"`), &k); err != nil {
			k = string(raw)
		}
	}
	if len(k) > maxKeyEcho {
		cut := maxKeyEcho
		for cut > 0 && !utf8.RuneStart(k[cut]) {
			cut--
		}
		k = k[:cut] + "…"
	}
	return k
}
