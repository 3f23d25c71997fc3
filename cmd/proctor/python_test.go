package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/internal/testenv"
)

// TestPythonClient runs the Python client's tests (clients/python) and the README's trainer
// loop, as written, against a real proctor dev: groups of the demo taskset by the oracle model,
// taken once each, and exported.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.MissingTool(t, "python3 (the Python client's tests)")
	}
	dataDir := t.TempDir()
	dev := startDev(t, dataDir)
	root := testenv.ModuleRoot(t)
	clientDir := filepath.Join(root, "clients", "python")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PROCTOR_") {
			env = append(env, kv)
		}
	}
	env = append(env, "PYTHONPATH="+clientDir, "PYTHONDONTWRITEBYTECODE=1", "PROCTOR_CONFIG_DIR="+t.TempDir())
	run := func(dir string, extraEnv []string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), python, args...)
		cmd.Dir, cmd.Env = dir, append(env, extraEnv...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("python3 %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run(clientDir, []string{"PROCTOR_API_URL=" + dev.info.APIURL, "PROCTOR_API_KEY=" + dev.info.APIKey},
		"-m", "unittest", "-v", "test_proctor_client"); !strings.Contains(out, "Ran 7 tests") || !strings.Contains(out, "OK") {
		t.Errorf("the client's tests:\n%s", out)
	}

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- trainer-example -->\n```python\n(.*?)```\n<!-- /trainer-example -->").FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README's trainer loop is not marked <!-- trainer-example -->")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "trainer.py"), m[1], 0o644); err != nil {
		t.Fatal(err)
	}
	// As written against a dev instance: its credentials found in its data dir.
	out := run(dir, []string{"PROCTOR_DATA_DIR=" + dataDir}, "trainer.py")
	for _, want := range []string{"step 0: group ", "rewards [1, 1, 1]", "step 1: ", "lines exported"} {
		if !strings.Contains(out, want) {
			t.Errorf("the README's trainer loop printed no %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"step-0.jsonl", "step-1.jsonl"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || strings.Count(string(b), "\n") == 0 {
			t.Errorf("%s: %v, %d bytes; want the step's attempts", f, err, len(b))
		}
	}
}
