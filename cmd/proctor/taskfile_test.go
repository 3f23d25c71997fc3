package main

import (
	"encoding/json"
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
		{"lines.jsonl", "{\"name\": \"a\"}\n  {\"name\" \"b\"}\n", "lines.jsonl:2:11"},
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

// TestJobProgressFingerprintIsStable: two polls of an unchanged job read the same progress, so
// a wait on a stuck job sees the stall (a struct printed with %v shows its reward pointer's
// address, new at every poll, and the wait would never fail).
func TestJobProgressFingerprintIsStable(t *testing.T) {
	body := []byte(`{"avg_reward": 0.5, "pending": 1, "running": 2, "completed": 3, "total_traces": 6}`)
	var a, b summary
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() || !strings.Contains(a.String(), "avg_reward:0.5") {
		t.Errorf("the same summary read twice: %s and %s", a, b)
	}
}
