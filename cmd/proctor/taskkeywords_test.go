package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/internal/harbor"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

// writeHarborTask writes a Harbor task folder with this task.toml under dir/name.
func writeHarborTask(t *testing.T, dir, name, toml string) string {
	t.Helper()
	d := filepath.Join(dir, name)
	for file, content := range map[string]string{
		"task.toml":              toml,
		"instruction.md":         "Do the thing.\n",
		"environment/Dockerfile": "FROM ubuntu:24.04\n",
		"tests/test.sh":          "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(d, file)), 0o755)
		if err := os.WriteFile(filepath.Join(d, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// A Harbor import keeps what task.toml says of a task beyond what runs it: [task] keywords (with
// Terminal-Bench 2's [metadata].tags) as the task's keywords, and authors, version, source and
// the [metadata] table as its metadata under "harbor"; `proctor tasksets show` then finds the
// tasks by keyword and by search, with a KEYWORDS column.
func TestHarborImportKeepsKeywordsAndMetadata(t *testing.T) {
	dir := t.TempDir()
	current := writeHarborTask(t, dir, "hello-world", `schema_version = "1.4"
source = "https://example.com/bench"

[task]
name = "proctor/hello-world"
version = "1.2.0"
description = "Create a file with a greeting."
keywords = ["files", "warm-up", "Files", " "]
authors = [{ name = "Ada", email = "ada@example.com" }]

[metadata]
difficulty = "easy"
`)
	tb2 := writeHarborTask(t, dir, "log-census", `version = "1.0"

[metadata]
author_name = "Grace"
difficulty = "medium"
category = "shell"
tags = ["grep", "sed", "GREP"]
`)
	var tasks []map[string]any
	for _, d := range []string{current, tb2} {
		task, err := harbor.Read(d, harbor.Options{})
		if err != nil || len(task.Refusals) > 0 {
			t.Fatalf("read %s: %v %v", d, err, task.Refusals)
		}
		tasks = append(tasks, harborUploadTask(task, "harbor-env"))
	}
	if kw, _ := tasks[0]["keywords"].([]string); strings.Join(kw, ",") != "files,warm-up" {
		t.Errorf("keywords of the 1.4 task = %v, want [task].keywords, each once, blank ones left out", tasks[0]["keywords"])
	}
	if kw, _ := tasks[1]["keywords"].([]string); strings.Join(kw, ",") != "grep,sed" {
		t.Errorf("keywords of the Terminal-Bench 2 task = %v, want its [metadata].tags, each once", tasks[1]["keywords"])
	}
	meta, _ := json.Marshal(tasks[0]["metadata"])
	if want := `{"harbor":{"authors":[{"name":"Ada","email":"ada@example.com"}],"metadata":{"difficulty":"easy"},"source":"https://example.com/bench","version":"1.2.0"}}`; string(meta) != want {
		t.Errorf("metadata of the 1.4 task = %s, want %s", meta, want)
	}
	meta, _ = json.Marshal(tasks[1]["metadata"])
	if want := `{"harbor":{"metadata":{"author_name":"Grace","category":"shell","difficulty":"medium","tags":["grep","sed","GREP"]}}}`; string(meta) != want {
		t.Errorf("metadata of the Terminal-Bench 2 task = %s, want %s", meta, want)
	}

	// Uploaded as the import does, into a real API.
	store := storetest.Open(t, models.SQLite)
	b, err := store.BootstrapIfEmpty(t.Context(), "alpha", "Ada", "ada@example.com")
	if err != nil {
		t.Fatal(err)
	}
	caller := &models.Caller{TeamID: b.Team.ID, UserID: b.User.ID, MembershipID: b.Membership.ID}
	env, err := registry.Of(store).CreateRegistry(t.Context(), caller, registry.NewRegistry{Name: "harbor-env"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registry.Of(store).CreateBuild(t.Context(), env.ID, registry.NewBuild{Status: registry.BuildSucceeded, SetLatest: true,
		Scenarios: []models.Scenario{{Name: harbor.Scenario}}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Store: store, Logger: slog.New(slog.DiscardHandler)}).Handler())
	defer srv.Close()
	c := &apiClient{base: srv.URL, key: b.Token, http: srv.Client()}
	if created, _, _, err := uploadInBatches(t.Context(), c, "bench", tasks); err != nil || created != 2 {
		t.Fatalf("upload = %d created, %v", created, err)
	}
	if created, updated, unchanged, err := uploadInBatches(t.Context(), c, "bench", tasks); err != nil || created+updated != 0 || unchanged != 2 {
		t.Errorf("the same import again = %d created, %d updated, %v; want all unchanged", created, updated, err)
	}

	cli := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(t.Context(), append(args, "--api-url", srv.URL, "--api-key", b.Token), &out, io.Discard); err != nil {
			t.Fatalf("proctor %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	out := cli("tasksets", "show", "bench", "--keyword", "GREP")
	if !strings.Contains(out, "1 of them match") || !strings.Contains(out, "KEYWORDS") || !strings.Contains(out, "log-census") ||
		!strings.Contains(out, "grep, sed") || strings.Contains(out, "hello-world") {
		t.Errorf("tasksets show --keyword GREP:\n%s\nwant log-census alone, with its keywords", out)
	}
	out = cli("tasksets", "show", "bench", "--search", "warm")
	if !strings.Contains(out, "proctor/hello-world") || !strings.Contains(out, "files, warm-up") || strings.Contains(out, "log-census") {
		t.Errorf("tasksets show --search warm:\n%s\nwant hello-world alone", out)
	}
	var shown struct {
		Tasks []struct {
			Name     string
			Keywords []string
		}
	}
	if err := json.Unmarshal([]byte(cli("tasksets", "show", "bench", "--search", "census", "--json")), &shown); err != nil ||
		len(shown.Tasks) != 1 || shown.Tasks[0].Name != "log-census" || strings.Join(shown.Tasks[0].Keywords, ",") != "grep,sed" {
		t.Errorf("tasksets show --search census --json = %+v, %v", shown, err)
	}
}
