package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/testenv"
)

// TestWebApp drives the web app in Chromium against a real dev instance (web/e2e/app.mjs): sign
// in, the jobs list, a job with its histogram and attempts, a trace to its reward, both themes,
// sign out; axe-core audits every page. Screenshots (1400×900) land in $PROCTOR_SCREENSHOTS, or
// a temporary directory.
func TestWebApp(t *testing.T) {
	web := testenv.WebDeps(t)
	chromium := testenv.Chromium(t)
	dev := startDev(t, t.TempDir())
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey}

	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	var launched struct {
		JobID string `json:"job_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"taskset_id": c.tasksetID("demo"), "model_ids": []string{oracle},
		"name": "web demo"}, &launched); code != 200 && code != 201 {
		t.Fatalf("launch = %d", code)
	}
	if sum := c.waitJob(launched.JobID, nil); sum.Completed != 3 {
		t.Fatalf("the demo job: %+v", sum)
	}

	shots := os.Getenv("PROCTOR_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(web, "e2e", "app.mjs"))
	cmd.Env = append(os.Environ(), "PROCTOR_URL="+dev.info.APIURL, "PROCTOR_KEY="+dev.info.APIKey, "JOB_ID="+launched.JobID,
		"JOB_NAME=web demo", "CHROMIUM="+chromium, "SHOTS="+shots)
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res struct {
		OK       bool
		Failures []string
		Timings  map[string]int
	}
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &res); jerr != nil {
		t.Fatalf("the browser run: %v\n%s", err, out)
	}
	t.Logf("browser steps (ms): %v; screenshots in %s", res.Timings, shots)
	for _, f := range res.Failures {
		t.Error(f)
	}
	if err != nil && len(res.Failures) == 0 {
		t.Errorf("the browser run: %v\n%s", err, out)
	}
}
