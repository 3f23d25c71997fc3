package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

func cmdEval(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		model := fs.String("model", "", "model to run (a model_name, e.g. oracle)")
		groupSize := fs.Int("group-size", 1, "attempts per task")
		maxConcurrent := fs.Int("max-concurrent", 10, "attempts live at once")
		maxSteps := fs.Int("max-steps", 30, "model steps per attempt")
		name := fs.String("name", "", "job name (default: <taskset> × <model>)")
		parent := fs.String("parent", "", "the job this one follows up, e.g. the one it re-runs (recorded as the job's metadata.parent_job_id)")
		maxCost := fs.Float64("max-cost-usd", 0, "a ceiling in USD on what the job spends (model calls and environment time): at it the job pauses (see proctor jobs resume); 0: none")
		multiplier := fs.Float64("timeout-multiplier", 1, "scale each attempt's run and startup timeouts, and a Harbor task's verifier and healthcheck times, by this (0.1 to 100; recorded on the job)")
		agentRef := fs.String("agent", "", "a brought agent to run instead of the built-in loop (NAME, NAME:VERSION or NAME@DIGEST: see proctor agent list); it calls --model")
		agentConfig := agentConfigFlag{}
		fs.Var(agentConfig, "agent-config", "agent settings merged over each task's agent config: KEY=VALUE (VALUE read as JSON when it is JSON, else as text), or @FILE.json (an object); repeatable, later ones win")
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			if *model == "" {
				return usagef("--model is required: proctor eval TASKSET --model MODEL (see proctor models)")
			}
			c, err := client()
			if err != nil {
				return err
			}
			tasksetID, err := c.tasksetByName(ctx, pos[0])
			if err != nil {
				return err
			}
			m, err := c.resolveModel(ctx, *model)
			if err != nil {
				return err
			}
			if *name == "" {
				*name = pos[0] + " × " + m.ModelName
				if *agentRef != "" {
					*name = pos[0] + " × " + *agentRef + " × " + m.ModelName
				}
			}
			var launched struct {
				JobID    string `json:"job_id"`
				Accepted int    `json:"accepted"`
				Rejected int    `json:"rejected"`
			}
			body := map[string]any{"taskset_id": tasksetID, "model_ids": []string{m.ID}, "group_size": *groupSize,
				"max_concurrent": *maxConcurrent, "max_steps": *maxSteps, "name": *name}
			if *parent != "" {
				body["parent_job_id"] = *parent
			}
			if *agentRef != "" {
				body["agent"] = *agentRef
			}
			if len(agentConfig) > 0 {
				body["agent_config"] = map[string]any(agentConfig)
			}
			if *maxCost < 0 {
				return usagef("--max-cost-usd %g: give a positive ceiling, or 0 for none", *maxCost)
			}
			if *maxCost > 0 {
				body["max_cost_usd"] = *maxCost
			}
			if *multiplier != 1 {
				body["timeout_multiplier"] = *multiplier
			}
			if err := c.do(ctx, http.MethodPost, "/v2/rollouts/run_list", body, &launched); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "job %s: %s, %d attempts per task\n", launched.JobID, *name, *groupSize)
			c.printBuilds(ctx, launched.JobID, stdout)
			if note := c.capacityNote(ctx, min(*maxConcurrent, launched.Accepted**groupSize), *maxConcurrent); note != "" {
				fmt.Fprintln(stdout, note)
			}

			// Ctrl-C cancels the job rather than leaving it running unseen.
			sum, err := c.follow(ctx, launched.JobID, stderr)
			if errors.Is(err, context.Canceled) {
				return c.cancelInterrupted(launched.JobID, stderr)
			}
			if err != nil {
				return err
			}
			return c.printJobTable(ctx, stdout, launched.JobID, sum)
		}
	}
}

// evalModel is a catalog model as proctor eval runs it.
type evalModel struct {
	ID        string `json:"id"`
	ModelName string `json:"model_name"`
}

// resolveModel finds the model a name (or id) names; an unknown one is an error that lists the
// models the caller can run.
func (c *apiClient) resolveModel(ctx context.Context, name string) (evalModel, error) {
	var m evalModel
	err := c.do(ctx, http.MethodGet, "/v2/models/resolve?model="+url.QueryEscape(name), nil, &m)
	var ae *apiError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		names := []string{}
		if ms, lerr := c.models(ctx); lerr == nil {
			for _, x := range ms {
				names = append(names, x.ModelName)
			}
		}
		return m, fmt.Errorf("no model %q; you can run: %s (see proctor models)", name, strings.Join(names, ", "))
	case err != nil:
		return m, fmt.Errorf("model %s: %w", name, err)
	}
	return m, nil
}

// cancelInterrupted cancels a job whose follower was interrupted (Ctrl-C), and says so.
func (c *apiClient) cancelInterrupted(jobID string, stderr io.Writer) error {
	fmt.Fprintln(stderr, "\ninterrupted: cancelling the job…")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out struct{ Cancelled int }
	if err := c.do(ctx, http.MethodPost, "/v2/rollouts/cancel_job", map[string]any{"job_id": jobID}, &out); err != nil {
		return err
	}
	return fmt.Errorf("job %s cancelled (%d live attempts stopped)", jobID, out.Cancelled)
}

// printBuilds says which build of each environment a job runs: the latest when it was launched
// (a task whose runtime_config names an image runs that one). After a redeploy, this is the line
// that says whether the fix is in. Best effort: a failed read prints nothing.
func (c *apiClient) printBuilds(ctx context.Context, jobID string, stdout io.Writer) {
	var links struct {
		Links []struct {
			Registry struct{ ID, Name string } `json:"registry"`
		} `json:"links"`
	}
	if c.do(ctx, http.MethodGet, "/v2/jobs/"+url.PathEscape(jobID)+"/entity-links", nil, &links) != nil {
		return
	}
	seen := map[string]bool{}
	for _, l := range links.Links {
		if l.Registry.ID == "" || seen[l.Registry.ID] {
			continue
		}
		seen[l.Registry.ID] = true
		var reg struct {
			LatestBuild *deployBuild `json:"latest_build"`
		}
		if c.do(ctx, http.MethodGet, "/v2/registry/"+url.PathEscape(l.Registry.ID), nil, &reg) != nil || reg.LatestBuild == nil {
			continue
		}
		b := reg.LatestBuild
		fmt.Fprintf(stdout, "environment %s: build %d (%s)\n", l.Registry.Name, b.Version, cmp.Or(b.Digest, b.ImageName))
	}
}

// capacityNote says why a job will run fewer than live attempts at once: the live workers run
// fewer sandboxes (or none). Empty when they run enough, or when the API cannot say.
func (c *apiClient) capacityNote(ctx context.Context, live, maxConcurrent int) string {
	w, err := c.workers(ctx)
	if err != nil {
		return ""
	}
	hosts := 0
	for _, q := range w.Queues {
		if q.SandboxCapacity > 0 {
			hosts += q.Workers
		}
	}
	switch {
	case w.SandboxCapacity == 0:
		return "note: no live worker runs sandboxes: the attempts wait until one polls their queue (proctor worker --queues sandboxes-cpu)"
	case live > w.SandboxCapacity:
		return fmt.Sprintf("note: at most %d attempts run at once, not %d (--max-concurrent %d): the live workers run %d sandboxes at once (%s); "+
			"the others wait for a free one. Raise it with --max-sandboxes on the workers, or add workers (see proctor workers)",
			w.SandboxCapacity, live, maxConcurrent, w.SandboxCapacity, plural(hosts, "worker"))
	}
	return ""
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func (c *apiClient) tasksetByName(ctx context.Context, name string) (string, error) {
	var page struct {
		Items []struct{ ID, Name string } `json:"items"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/tasksets?limit=500&search="+url.QueryEscape(name), nil, &page); err != nil {
		return "", err
	}
	for _, t := range page.Items {
		if t.Name == name {
			return t.ID, nil
		}
	}
	return "", fmt.Errorf("no taskset named %q (see `proctor tasksets list`)", name)
}

// agentConfigFlag gathers --agent-config values into one JSON object: KEY=VALUE sets KEY (VALUE
// read as JSON when it parses, else as text), @FILE merges the JSON object FILE holds.
type agentConfigFlag map[string]any

func (f agentConfigFlag) String() string {
	b, _ := json.Marshal(map[string]any(f))
	return string(b)
}

func (f agentConfigFlag) Set(v string) error {
	if file, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			return fmt.Errorf("%s: want a JSON object: %v", file, err)
		}
		maps.Copy(f, obj)
		return nil
	}
	key, value, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return fmt.Errorf("%q: want KEY=VALUE or @FILE.json", v)
	}
	var parsed any
	if json.Unmarshal([]byte(value), &parsed) == nil {
		f[key] = parsed
	} else {
		f[key] = value
	}
	return nil
}
