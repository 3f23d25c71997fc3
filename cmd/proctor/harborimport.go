package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/harbor"
	"github.com/proctorhq/proctor/models/catalog"
)

// maxUploadBatch bounds one POST /v2/tasks/upload of an import (the server takes 10 MiB).
const maxUploadBatch = 8 << 20

// cmdTasksImportHarbor imports Harbor-format tasks (Terminal-Bench and the datasets in its
// format): a task directory, a directory of them, or a .tar.gz/.zip of either. Each task's
// environment/ is built with the shell server added (tasks whose environment/ folders are
// byte-identical share one build, an environment named by the folder's hash, built once ever);
// each task is uploaded into the taskset as a task of the shell server's harbor scenario. What
// a task asks that Proctor does not honour refuses the task, and the table says why.
func cmdTasksImportHarbor(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		taskset := fs.String("taskset", "", "the taskset to import into (default: the dataset folder's or archive's name)")
		var allow []string
		fs.Func("allow-unenforced", "accept tasks declaring this limit although no provider enforces it (storage_mb); repeatable, or comma-separated", func(v string) error {
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); f != "storage_mb" {
					return fmt.Errorf("%q: the only limit accepted unenforced is storage_mb", f)
				}
				allow = append(allow, f)
			}
			return nil
		})
		buildArgs := map[string]string{}
		fs.Func("build-arg", "an ARG value of the tasks' Dockerfiles (KEY=VALUE; repeatable), e.g. BASE_IMAGE for a base image of your own registry", func(v string) error {
			k, val, ok := strings.Cut(v, "=")
			if !ok || k == "" {
				return fmt.Errorf("%q: KEY=VALUE", v)
			}
			buildArgs[k] = val
			return nil
		})
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			if len(pos) < 2 || pos[0] != "harbor" {
				return errors.New("usage: proctor tasks import harbor PATH... (a task directory, a directory of tasks, or a .tar.gz/.zip of either)")
			}
			var dirs []string
			for _, p := range pos[1:] {
				found, cleanup, err := harborTaskDirs(p)
				if err != nil {
					return err
				}
				defer cleanup()
				dirs = append(dirs, found...)
			}
			if *taskset == "" {
				*taskset = datasetName(pos[1])
			}
			c, err := client()
			if err != nil {
				return err
			}
			return importHarbor(ctx, c, dirs, *taskset, harbor.Options{AllowUnenforced: allow}, buildArgs, stdout, stderr)
		}
	}
}

// harborTaskDirs are the task directories at p (unpacked first when p is an archive) and what
// removes the unpacked copy.
func harborTaskDirs(p string) ([]string, func(), error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {}
	root := p
	if !fi.IsDir() {
		tmp, err := os.MkdirTemp("", "proctor-harbor-*")
		if err != nil {
			return nil, nil, err
		}
		cleanup = func() { os.RemoveAll(tmp) }
		if _, err := archive.ExtractFile(p, tmp, archive.DefaultLimits); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("%s: %w", p, err)
		}
		root = tmp
		// An archive of one folder holds the dataset (or task) in it.
		if entries, err := os.ReadDir(tmp); err == nil && len(entries) == 1 && entries[0].IsDir() && !harbor.IsTaskDir(tmp) {
			root = filepath.Join(tmp, entries[0].Name())
		}
	}
	dirs, err := harbor.FindTasks(root)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("%s: %w", p, err)
	}
	return dirs, cleanup, nil
}

// datasetName is the default taskset of an import from p: its folder's name (a task's parent
// folder's, when p is one task), or its archive's without the extension.
func datasetName(p string) string {
	abs, _ := filepath.Abs(p)
	if harbor.IsTaskDir(abs) {
		abs = filepath.Dir(abs)
	}
	base := filepath.Base(abs)
	for _, ext := range []string{".tar.gz", ".tgz", ".tar", ".zip"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base
}

// harborEnvName is the environment of the tasks whose environment/ hashes to hash, built with
// buildArgs: its name says its content, so that an import finds a build it can share by name.
func harborEnvName(hash string, buildArgs map[string]string) string {
	h := sha256.New()
	io.WriteString(h, hash)
	for _, k := range slices.Sorted(maps.Keys(buildArgs)) {
		fmt.Fprintf(h, "\x00%s=%s", k, buildArgs[k])
	}
	return "harbor-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// importedTask is one row of an import's table.
type importedTask struct {
	task   *harbor.Task
	env    string
	result string
}

func importHarbor(ctx context.Context, c *apiClient, dirs []string, taskset string, opts harbor.Options, buildArgs map[string]string, stdout, stderr io.Writer) error {
	start := time.Now()
	var rows []*importedTask
	byHash := map[string][]*importedTask{}
	for _, d := range dirs {
		t, err := harbor.Read(d, opts)
		if err != nil {
			rows = append(rows, &importedTask{task: &harbor.Task{Name: filepath.Base(d)}, result: "refused: " + err.Error()})
			continue
		}
		r := &importedTask{task: t}
		rows = append(rows, r)
		if len(t.Refusals) > 0 {
			r.result = "refused: " + strings.Join(t.Refusals, "; ")
			continue
		}
		r.env = harborEnvName(t.ContextHash, buildArgs)
		byHash[t.ContextHash] = append(byHash[t.ContextHash], r)
	}
	// One build per distinct environment/ folder, unless the environment exists (built before).
	built, shared := 0, 0
	for _, hash := range slices.Sorted(maps.Keys(byHash)) {
		group := byHash[hash]
		name := harborEnvName(hash, buildArgs)
		how, err := ensureHarborBuild(ctx, c, name, group[0].task.EnvironmentDir, buildArgs, stderr)
		if err != nil {
			for _, r := range group {
				r.result, r.env = "refused: the environment did not build: "+err.Error(), ""
			}
			continue
		}
		if how == "built" {
			built++
		}
		for i, r := range group {
			switch {
			case how == "built" && i == 0:
				r.result = "imported (built " + name + ")"
			case how == "built":
				r.result, shared = "imported (shared build "+name+")", shared+1
			default:
				r.result, shared = "imported ("+name+" built before)", shared+1
			}
		}
	}
	var tasks []map[string]any
	for _, r := range rows {
		if r.env != "" {
			tasks = append(tasks, harborUploadTask(r.task, r.env))
		}
	}
	created, updated, unchanged, err := uploadInBatches(ctx, c, taskset, tasks)
	if err != nil {
		return err
	}
	tw := newTable(stdout, "TASK", "RESULT")
	refused := 0
	for _, r := range rows {
		if strings.HasPrefix(r.result, "refused") {
			refused++
		}
		fmt.Fprintf(tw, "%s\t%s\n", r.task.Name, r.result)
		for _, n := range r.task.Notes {
			if r.env != "" {
				fmt.Fprintf(tw, "\t  note: %s\n", n)
			}
		}
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d tasks: %d imported into %s (%d created, %d updated, %d unchanged), %d refused; %d builds made, %d tasks on a shared build; %s\n",
		len(rows), len(tasks), taskset, created, updated, unchanged, refused, built, shared, time.Since(start).Round(100*time.Millisecond))
	if refused > 0 {
		return fmt.Errorf("%d of %d tasks refused (see the table)", refused, len(rows))
	}
	return nil
}

// ensureHarborBuild makes sure the team's environment name has a latest build of dir with the
// shell server: "built before" when it has one (the name is the folder's hash: same content),
// else it builds dir now ("built") and makes that build the latest.
func ensureHarborBuild(ctx context.Context, c *apiClient, name, dir string, buildArgs map[string]string, log io.Writer) (string, error) {
	if e, err := c.ownEnvironment(ctx, name); err != nil {
		return "", err
	} else if e != nil && e.LatestBuildID != nil {
		return "built before", nil
	}
	src, _, err := packUpload(dir)
	if err != nil {
		return "", err
	}
	b, err := c.buildSource(ctx, src, name, "", map[string]any{"shell_server": true, "source": "harbor import", "build_args": buildArgs}, log)
	if err != nil {
		return "", err
	}
	if b.Status != "succeeded" {
		return "", fmt.Errorf("build %s %s: %s (its log is printed above, and at GET /v2/builds/%s/logs)", b.ID, b.Status, b.ErrorMessage, b.ID)
	}
	if err := c.do(ctx, http.MethodPost, "/v2/builds/"+b.ID+"/set-latest", map[string]any{}, nil); err != nil {
		return "", err
	}
	return "built", nil
}

// harborUploadTask is a task's entry in POST /v2/tasks/upload.
func harborUploadTask(t *harbor.Task, env string) map[string]any {
	e := t.Config.Environment
	limits := map[string]any{"run_timeout_s": t.AgentTimeoutSec()}
	if h := e.Healthcheck; h != nil {
		// The start (setup included) must outlast the healthcheck's worst case.
		limits["startup_timeout_s"] = max(120, math.Ceil(h.Worst())+60)
	}
	resources := map[string]any{}
	if e.CPUs != nil {
		resources["cpu"] = *e.CPUs
	}
	if e.MemoryMB != nil {
		resources["memory_mb"] = *e.MemoryMB
	}
	if e.GPUs != nil && *e.GPUs > 0 {
		gpu := map[string]any{"count": *e.GPUs}
		if len(e.GPUTypes) == 1 {
			gpu["type"] = strings.ToLower(e.GPUTypes[0])
		}
		resources["gpu"] = gpu
	}
	// Harbor installs agents into the task's container: an agent deployed to run inside runs in
	// the task's root, in its WORKDIR.
	rc := map[string]any{"limits": limits, "agents_inside": true}
	if len(resources) > 0 {
		rc["resources"] = resources
	}
	switch mode, _ := t.Network(); mode {
	case harbor.NetworkPublic:
		rc["network"] = true
	case harbor.NetworkAllowlist:
		rc["network"], rc["allowed_hosts"] = true, e.AllowedHosts
	default:
		rc["network"] = false
	}
	task := map[string]any{
		"name":           t.Name,
		"external_id":    "harbor:" + t.Name,
		"env":            map[string]any{"name": env},
		"scenario":       harbor.Scenario,
		"args":           t.ScenarioArgs(),
		"runtime_config": rc,
	}
	if v := t.Validation(); len(v) > 0 {
		task["validation"] = v
	}
	if p := t.Config.Task; p != nil && p.Description != "" {
		task["description"] = p.Description
	}
	if kw := harborKeywords(t); len(kw) > 0 {
		task["keywords"] = kw
	}
	if md := harborMetadata(t); md != nil {
		task["metadata"] = map[string]any{"harbor": md}
	}
	return task
}

// Bounds of the upload's keywords (POST /v2/tasks/upload refuses more; its metadata's is
// catalog.MaxTaskMetadataBytes).
const (
	maxTaskKeywords     = 100
	maxTaskKeywordRunes = 100
)

// harborKeywords are a task's keywords as the upload takes them: [task].keywords, then
// Terminal-Bench 2's [metadata].tags (when a list of strings), each once (ignoring case), blank
// ones left out. One the upload would refuse (over 100 characters, or past the 100th) is left
// out with a note.
func harborKeywords(t *harbor.Task) []string {
	var in []string
	if p := t.Config.Task; p != nil {
		in = append(in, p.Keywords...)
	}
	if tags, ok := t.Config.Metadata["tags"].([]any); ok {
		for _, tag := range tags {
			if s, ok := tag.(string); ok {
				in = append(in, s)
			}
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, k := range in {
		k = strings.TrimSpace(k)
		switch folded := strings.ToLower(k); {
		case k == "" || seen[folded]:
		case utf8.RuneCountInString(k) > maxTaskKeywordRunes:
			t.Notes = append(t.Notes, fmt.Sprintf("keyword %.40q… left out: over %d characters", k, maxTaskKeywordRunes))
		case len(out) == maxTaskKeywords:
			t.Notes = append(t.Notes, fmt.Sprintf("keyword %q left out: a task keeps %d keywords", k, maxTaskKeywords))
		default:
			seen[folded] = true
			out = append(out, k)
		}
	}
	return out
}

// harborMetadata is what task.toml says of the task beyond what Proctor runs, kept as the task's
// metadata under "harbor": authors ([task].authors), version ([task].version), source, and
// metadata (the [metadata] table as it is: Terminal-Bench 2's author_name, difficulty, category,
// tags, …); nil when it says none of these. A [metadata] table that is no JSON (a NaN) or over
// the upload's 64 KiB is left out with a note.
func harborMetadata(t *harbor.Task) map[string]any {
	md := map[string]any{}
	if p := t.Config.Task; p != nil {
		if len(p.Authors) > 0 {
			md["authors"] = p.Authors
		}
		if p.Version != "" {
			md["version"] = p.Version
		}
	}
	if t.Config.Source != "" {
		md["source"] = t.Config.Source
	}
	if len(t.Config.Metadata) > 0 {
		md["metadata"] = t.Config.Metadata
		b, err := json.Marshal(map[string]any{"harbor": md})
		switch {
		case err != nil:
			delete(md, "metadata")
			t.Notes = append(t.Notes, fmt.Sprintf("[metadata] not kept with the task: %v", err))
		case len(b) > catalog.MaxTaskMetadataBytes:
			delete(md, "metadata")
			t.Notes = append(t.Notes, fmt.Sprintf("[metadata] not kept with the task: %d bytes as JSON, over the %d a task's metadata may hold", len(b), catalog.MaxTaskMetadataBytes))
		}
	}
	if len(md) == 0 {
		return nil
	}
	return md
}

// uploadInBatches uploads tasks into taskset, as few requests as the server's body bound allows.
func uploadInBatches(ctx context.Context, c *apiClient, taskset string, tasks []map[string]any) (created, updated, unchanged int, err error) {
	for len(tasks) > 0 {
		n, size := 0, 0
		for n < len(tasks) {
			b, _ := json.Marshal(tasks[n])
			if n > 0 && size+len(b) > maxUploadBatch {
				break
			}
			size += len(b)
			n++
		}
		var res struct {
			TaskCount    int `json:"task_count"`
			TasksCreated int `json:"tasks_created"`
			TasksUpdated int `json:"tasks_updated"`
		}
		if err := c.do(ctx, http.MethodPost, "/v2/tasks/upload", map[string]any{"taskset_name": taskset, "tasks": tasks[:n]}, &res); err != nil {
			return created, updated, unchanged, err
		}
		created, updated, unchanged = created+res.TasksCreated, updated+res.TasksUpdated, unchanged+res.TaskCount-res.TasksCreated-res.TasksUpdated
		tasks = tasks[n:]
	}
	return created, updated, unchanged, nil
}
