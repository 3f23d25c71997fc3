package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

// errUnreachable marks a request that never reached the API (refused, reset, timed out).
var errUnreachable = errors.New("the API is unreachable")

// unreachable wraps a transport error with what to check.
func unreachable(base string, err error) error {
	hint := ""
	if errors.Is(err, syscall.ECONNREFUSED) {
		hint = " (is `proctor dev` running there? start it, or point --api-url / PROCTOR_API_URL at your server)"
	}
	return fmt.Errorf("cannot reach the API at %s%s: %w: %w", base, hint, errUnreachable, err)
}

// retryable says whether a request may succeed later: the API was unreachable or answered that
// it is restarting or overloaded.
func retryable(err error) bool {
	var ae *apiError
	return errors.Is(err, errUnreachable) || (errors.As(err, &ae) && (ae.Status == http.StatusBadGateway ||
		ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusGatewayTimeout))
}

// versionString is the module version and VCS revision the binary was built from.
func versionString() string {
	v := version
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	rev, at, dirty := revision(info), buildSetting(info, "vcs.time"), buildSetting(info, "vcs.modified") == "true"
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " (" + rev
		if dirty {
			v += ", modified"
		}
		if at != "" {
			v += ", " + at
		}
		v += ")"
	}
	return v + " " + info.GoVersion
}

// cmdModels lists the models the caller may run.
func cmdModels(stdout, stderr io.Writer) flagsBody {
	return jsonClientCommand(func(ctx context.Context, c *apiClient, pos []string, asJSON bool) error {
		models, err := c.models(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(stdout, models)
		}
		return printModels(stdout, models)
	})
}

// printModels prints the models as a table.
func printModels(stdout io.Writer, models []modelRow) error {
	tw := newTable(stdout, "MODEL", "NAME", "PROVIDER", "CALLS")
	for _, m := range models {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", m.ModelName, m.Name, m.Provider, m.InferenceCount)
	}
	tw.Flush()
	fmt.Fprintln(stdout, "run one with: proctor eval TASKSET --model MODEL")
	return nil
}

type modelRow struct {
	ID             string `json:"id"`
	ModelName      string `json:"model_name"`
	Name           string `json:"name"`
	Provider       string `json:"provider"`
	InferenceCount int    `json:"inference_count"`
}

func (c *apiClient) models(ctx context.Context) ([]modelRow, error) {
	var page struct {
		Items []modelRow `json:"items"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/models?limit=500", nil, &page); err != nil {
		return nil, err
	}
	return page.Items, nil
}

// tasksPath is the route of a taskset's tasks, with the query of filter when it has any.
func tasksPath(id string, filter url.Values) string {
	if len(filter) == 0 {
		return "/v2/tasksets/" + id + "/tasks"
	}
	return "/v2/tasksets/" + id + "/tasks?" + filter.Encode()
}

// showTasksetJSON prints a taskset and every one of its tasks (that match filter) as the API
// answers them.
func showTasksetJSON(ctx context.Context, c *apiClient, name string, filter url.Values, stdout io.Writer) error {
	id, err := c.tasksetByName(ctx, name)
	if err != nil {
		return err
	}
	var out struct {
		Taskset json.RawMessage   `json:"taskset"`
		Tasks   []json.RawMessage `json:"tasks"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/tasksets/"+id, nil, &out.Taskset); err != nil {
		return err
	}
	if out.Tasks, err = allItems[json.RawMessage](ctx, c, tasksPath(id, filter)); err != nil {
		return err
	}
	return writeJSON(stdout, out)
}

// showTaskset prints a taskset's tasks (those that match filter).
func showTaskset(ctx context.Context, c *apiClient, name string, filter url.Values, stdout io.Writer) error {
	id, err := c.tasksetByName(ctx, name)
	if err != nil {
		return err
	}
	var ts struct {
		Name, Description string
		Purpose           string `json:"purpose"`
		TaskCount         int    `json:"task_count"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/tasksets/"+id, nil, &ts); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "taskset %s %s: %d tasks (%s)\n", ts.Name, id, ts.TaskCount, strings.ToLower(ts.Purpose))
	if ts.Description != "" {
		fmt.Fprintln(stdout, ts.Description)
	}
	tasks, err := allItems[struct {
		Name      string
		Status    string
		Version   int
		Keywords  []string  `json:"keywords"`
		UpdatedAt time.Time `json:"updated_at"`
	}](ctx, c, tasksPath(id, filter))
	if err != nil {
		return err
	}
	if len(filter) > 0 {
		fmt.Fprintf(stdout, "%d of them match\n", len(tasks))
	}
	fmt.Fprintln(stdout)
	tw := newTable(stdout, "TASK", "STATUS", "VERSION", "KEYWORDS", "UPDATED")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.Name, t.Status, t.Version, orDash(strings.Join(t.Keywords, ", ")), t.UpdatedAt.Local().Format("2006-01-02 15:04"))
	}
	tw.Flush()
	fmt.Fprintf(stdout, "\nrun it with: proctor eval %s --model MODEL\n", ts.Name)
	return nil
}

// cmdWorkers lists what the live workers offer per task queue.
func cmdWorkers(stdout, stderr io.Writer) flagsBody {
	return jsonClientCommand(func(ctx context.Context, c *apiClient, pos []string, asJSON bool) error {
		w, err := c.workers(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return writeJSON(stdout, w)
		}
		return printWorkers(stdout, w)
	})
}

// printWorkers prints the queues as a table.
func printWorkers(stdout io.Writer, w workersPage) error {
	if len(w.Queues) == 0 {
		fmt.Fprintln(stdout, "no live workers: nothing runs until one starts (proctor worker, or proctor dev)")
		return nil
	}
	tw := newTable(stdout, "QUEUE", "WORKERS", "SANDBOXES AT ONCE", "GPUS")
	for _, q := range w.Queues {
		sandboxes, gpus := orDash(""), orDash("")
		if q.SandboxCapacity > 0 {
			sandboxes, gpus = fmt.Sprint(q.SandboxCapacity), fmt.Sprint(q.GPUs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", q.Queue, q.Workers, sandboxes, gpus)
	}
	return tw.Flush()
}

// workersPage is the answer of GET /v2/workers.
type workersPage struct {
	Queues []struct {
		Queue           string `json:"queue"`
		Workers         int    `json:"workers"`
		SandboxCapacity int    `json:"sandbox_capacity"`
		GPUs            int    `json:"gpus"`
	} `json:"queues"`
	SandboxCapacity int `json:"sandbox_capacity"`
}

func (c *apiClient) workers(ctx context.Context) (workersPage, error) {
	var w workersPage
	err := c.do(ctx, http.MethodGet, "/v2/workers", nil, &w)
	return w, err
}
