package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// proctor export resumes a stream that broke off mid-line from the last whole line's cursor, so
// its output holds each attempt once and no partial line; filters go along on every request.
func TestExportResumesAfterABrokenStream(t *testing.T) {
	job := uuid.NewString()
	line := func(i int) string { return fmt.Sprintf(`{"cursor":"c%d","trace_id":"t%d"}`+"\n", i, i) }
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/jobs/"+job+"/export" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, 404)
			return
		}
		mu.Lock()
		asked = append(asked, r.URL.RawQuery)
		n := len(asked)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		switch n {
		case 1: // two whole lines, half of the third, then the connection drops
			w.Header().Set("Content-Length", "1000")
			fmt.Fprint(w, line(1)+line(2)+line(3)[:10])
		case 2:
			fmt.Fprint(w, line(3)+line(4))
		}
	}))
	defer srv.Close()
	var out, progress bytes.Buffer
	err := run(t.Context(), []string{"export", job, "--valid-only", "--status", "completed", "--api-url", srv.URL, "--api-key", "k"}, &out, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if want := line(1) + line(2) + line(3) + line(4); out.String() != want {
		t.Errorf("the export wrote\n%s\nwant\n%s", out.String(), want)
	}
	if len(asked) != 2 || !strings.Contains(asked[1], "cursor=c2") || !strings.Contains(asked[1], "valid_only=true") || !strings.Contains(asked[1], "status=completed") {
		t.Errorf("requests: %q, want the second to resume after c2 with the same filters", asked)
	}
	if !strings.Contains(progress.String(), "resuming") || !strings.Contains(progress.String(), "4 attempts exported") {
		t.Errorf("progress: %q", progress.String())
	}
	if err := run(t.Context(), []string{"export", job, "--min-reward", "lots", "--api-url", srv.URL, "--api-key", "k"}, &out, &progress); exitCode(err) != 2 {
		t.Errorf("--min-reward lots: %v, want a usage error", err)
	}
}

// proctor jobs show warns when a job's results mix builds of an environment or task versions,
// and says nothing for a job that does not.
func TestJobsShowWarnsOfMixedResults(t *testing.T) {
	mixed := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"mixed": %v, "environment_builds": [{"environment": "", "digest": "", "attempts": 1},
			{"environment": "todo", "build_version": 1, "digest": "sha256:aaaaaaaaaaaaaaaaaaaa", "attempts": 2, "scored_attempts": 2, "mean_reward": 0.5},
			{"environment": "todo", "build_version": 2, "digest": "sha256:bbbbbbbbbbbbbbbbbbbb", "attempts": 1, "scored_attempts": 1, "mean_reward": 0}],
			"tasks_with_several_versions": []}`, mixed)
	}))
	defer srv.Close()
	c := &apiClient{base: srv.URL, key: "k", http: srv.Client()}
	var out bytes.Buffer
	if err := printJobMix(t.Context(), c, uuid.NewString(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"warning: these results mix", "todo build 1 (sha256:aaaaaaaaaaaa…): 2 attempts, mean reward 0.500", "todo build 2 (sha256:bbbbbbbbbbbb…): 1 attempts, mean reward 0.000"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("jobs show printed %q, want %q", out.String(), want)
		}
	}
	mixed = false
	out.Reset()
	if err := printJobMix(t.Context(), c, uuid.NewString(), &out); err != nil || out.Len() != 0 {
		t.Errorf("a job that mixes nothing: %v %q, want nothing printed", err, out.String())
	}
}
