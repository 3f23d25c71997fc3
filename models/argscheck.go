package models

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ArgsViolations checks a task's args against its scenario's args_schema (or any arguments
// against an object's JSON Schema) and returns a message for each value that does not match, keyed by its path within args ("items[1]", "" for args
// itself). A schema that does not compile is the environment's to fix, not the task's: it checks
// nothing. The schema comes from an environment's author, so it is compiled in memory with no
// loader: a $ref to a file or a URL fails the compile instead of reading the server's files.
func ArgsViolations(schema map[string]any, args map[string]any) []FieldError {
	if len(schema) == 0 {
		return nil
	}
	doc, err := jsonValue(schema)
	if err != nil {
		return nil
	}
	const id = "https://proctor.invalid/args_schema.json"
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(id, doc); err != nil {
		return nil
	}
	sch, err := c.Compile(id)
	if err != nil {
		return nil
	}
	if args == nil {
		args = map[string]any{}
	}
	inst, err := jsonValue(args)
	if err != nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if err := sch.Validate(inst); !errors.As(err, &verr) {
		return nil
	}
	var out []FieldError
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			out = append(out, FieldError{Location: argsPath(u.InstanceLocation), Message: u.Error.String()})
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(verr.BasicOutput())
	if len(out) == 0 {
		out = append(out, FieldError{Message: verr.Error()})
	}
	return out
}

// jsonValue is v as the schema library reads JSON (numbers as json.Number).
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// argsPath turns a JSON pointer within args ("/items/1") into a path ("items[1]").
func argsPath(pointer string) string {
	var b strings.Builder
	for _, seg := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if seg == "" {
			continue
		}
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		if _, err := strconv.Atoi(seg); err == nil {
			fmt.Fprintf(&b, "[%s]", seg)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}
