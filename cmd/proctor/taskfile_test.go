package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTaskFilesWithBrokenJSONSayWhere: a task file that is not valid JSON is refused before any
// request, with the file, line and column of the mistake, as a compiler would point at it.
func TestTaskFilesWithBrokenJSONSayWhere(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, content, want string
	}{
		{"tasks.json", "{\"tasks\": [\n  {\"name\": \"a\",\n   \"env\": todo}\n]}\n", "tasks.json:3:12"},
		{"array.json", "[\n  {\"name\": \"a\"},\n  {\"name\": \"b\",}\n]\n", "array.json:3:16"},
		{"wrong.json", "{\"tasks\": [],\n \"taskset_name\": 7}\n", ""},
		{"lines.jsonl", "{\"name\": \"a\"}\n{\"name\" \"b\"}\n", "lines.jsonl:2:9"},
	} {
		path := filepath.Join(dir, tt.name)
		if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readTaskFile(path)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want it read (the server checks field types)", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, tt.want)+":") {
			t.Errorf("%s: %v, want it to start with %s", tt.name, err, tt.want)
		}
	}
}
