package models

import (
	"os"
	"path/filepath"
	"testing"
)

// TestArgsSchemaReadsNothingOutsideItself: an args_schema is an environment author's text; a $ref
// in it to a file of the server (or a URL) is not followed, so it can neither read the server's
// files nor hang an upload on a pipe. Such a schema checks nothing.
func TestArgsSchemaReadsNothingOutsideItself(t *testing.T) {
	file := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(file, []byte(`{"type": "string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + file, file, "https://example.com/schema.json"} {
		if v := ArgsViolations(map[string]any{"$ref": ref}, map[string]any{"items": []any{"x"}}); len(v) != 0 {
			t.Errorf("a schema referring to %s was followed: %+v", ref, v)
		}
	}
	// A schema of its own still checks.
	if v := ArgsViolations(map[string]any{"type": "object", "properties": map[string]any{"items": map[string]any{"type": "array"}}},
		map[string]any{"items": "x"}); len(v) != 1 || v[0].Location != "items" {
		t.Errorf("a self-contained schema: %+v, want one violation at items", v)
	}
}
