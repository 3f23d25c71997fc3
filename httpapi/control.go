package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
)

// Control characters (C0 and DEL, except tab, line feed and carriage return) have no place in
// names, queries or any stored text; NUL in particular cannot be stored by Postgres and broke
// SQL on SQLite. rejectControlChars answers them with a 422 at the edge, before any handler, in
// the path or a query parameter; readBody (bodygate.go) refuses them escaped (\u0000 …) in a
// JSON body, once the caller is authenticated.
func (s *Server) rejectControlChars(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if i := controlIndex(r.URL.Path); i >= 0 {
			writeValidation(w, &huma.ErrorDetail{Location: "path", Message: controlMessage(r.URL.Path, i)})
			return
		}
		q := r.URL.Query()
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var bad []*huma.ErrorDetail
		for _, k := range keys {
			if i := controlIndex(k); i >= 0 {
				bad = append(bad, &huma.ErrorDetail{Location: "query", Message: controlMessage(k, i)})
			}
			for _, v := range q[k] {
				if i := controlIndex(v); i >= 0 {
					bad = append(bad, &huma.ErrorDetail{Location: "query." + k, Message: controlMessage(v, i)})
				}
			}
		}
		if len(bad) > 0 {
			writeValidation(w, bad...)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isControl(c rune) bool {
	return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f
}

// controlIndex is the byte index of the first control character of s, or -1.
func controlIndex(s string) int {
	return strings.IndexFunc(s, isControl)
}

func controlMessage(s string, i int) string {
	c, _ := utf8.DecodeRuneInString(s[i:])
	return fmt.Sprintf("control character U+%04X at byte %d is not allowed", c, i)
}

// jsonControlEscape finds a \uXXXX escape of a control character inside a JSON string (raw
// control characters are invalid JSON, which the decoder reports itself). It returns the escape's
// offset and the character, or -1.
func jsonControlEscape(b []byte) (int, rune) {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		if b[i+1] != 'u' || i+6 > len(b) {
			i++ // any other escape (\\, \", \n …) is two bytes
			continue
		}
		if v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16); err == nil && isControl(rune(v)) {
			return i, rune(v)
		}
		i += 5
	}
	return -1, 0
}

// writeValidation writes a 422 in the validation body Huma uses for every other one.
func writeValidation(w http.ResponseWriter, details ...*huma.ErrorDetail) {
	errs := make([]error, len(details))
	for i, d := range details {
		errs[i] = d
	}
	em := newHumaError(http.StatusUnprocessableEntity, "validation failed", errs...)
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	json.NewEncoder(w).Encode(em) //nolint:errcheck // the client went away
}
