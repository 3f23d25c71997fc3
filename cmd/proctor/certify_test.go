package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/httpapi"
)

// proctor env certify runs every task of a taskset on the build, the oracle k times and the idle
// and random agents and the tamper probe once each (whose calls of the hidden dispatchers are
// refused), as one job, and flags what a benchmark must not trust: a task whose oracle
// fails, and one that an agent doing nothing passes; a sound task passes. An environment that
// requires it keeps the flagged build from becoming the latest unless forced. On SQLite (see oneStore).
func TestACertificationFlagsTasksABenchmarkMustNotTrust(t *testing.T) {
	oneStore(t, "sqlite", testCertify)
}

func testCertify(t *testing.T, storeArgs []string, _ string) {
	dev := startDev(t, t.TempDir(), storeArgs...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	task := func(name string, items []string, calls ...string) map[string]any {
		validation := []any{}
		for _, title := range calls {
			validation = append(validation, map[string]any{"name": "add_todo", "arguments": map[string]any{"title": title}})
		}
		return map[string]any{"name": name, "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": items}, "validation": validation}
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "certify", "tasks": []any{
		task("sound", []string{"buy milk"}, "buy milk"),
		task("no-work", []string{}),
		task("wrong-oracle", []string{"walk the dog"}, "buy milk"),
	}}, nil)
	var envs struct {
		Items []environmentRow `json:"items"`
	}
	c.call("GET", "/v2/registry?search=todo", nil, &envs)
	if len(envs.Items) != 1 || envs.Items[0].LatestBuildID == nil {
		t.Fatalf("the todo environment: %+v", envs.Items)
	}
	build := *envs.Items[0].LatestBuildID

	out, err := c.cli("env", "certify", build, "--taskset", "certify", "--k", "2")
	if err == nil || !strings.Contains(err.Error(), "flagged") {
		t.Fatalf("proctor env certify: %v, want it to fail flagged\n%s", err, out)
	}
	var cert httpapi.Certification
	c.call("GET", "/v2/builds/"+build+"/certification", nil, &cert)
	want := map[string]struct {
		runs, passes int
		idle, random float64
		flags        string
	}{
		"sound":        {2, 2, 0, 0, ""},
		"no-work":      {2, 2, 1, 1, "passes_without_work"},
		"wrong-oracle": {2, 0, 0, 0, "oracle_fails"},
	}
	if cert.Status != "flagged" || cert.K != 2 || len(cert.Tasks) != 3 || cert.FinishedAt == nil || !strings.HasPrefix(cert.BuildDigest, "sha256:") {
		t.Fatalf("the certification: %+v", cert)
	}
	if su := cert.Startup; su.Samples != 15 || su.P50MS == nil || *su.P50MS <= 0 || *su.P99MS < *su.P50MS || !strings.Contains(out, "environment start-up") {
		t.Errorf("the certification's start-up figures: %+v\n%s", su, out)
	}
	if by := cert.StartupByProvider; len(by) != 1 || by[0].Provider != "process" || by[0].Samples != 15 || *by[0].P50MS != *cert.Startup.P50MS ||
		!strings.Contains(out, "on process sandboxes: p50") {
		t.Errorf("the certification's start-up by provider: %+v\n%s", by, out)
	}
	for _, got := range cert.Tasks {
		w, ok := want[got.TaskName]
		if !ok || got.OracleRuns != w.runs || got.OraclePasses != w.passes || got.IdleReward == nil || *got.IdleReward != w.idle ||
			got.RandomReward == nil || *got.RandomReward != w.random ||
			got.Tamper == nil || strings.Join(got.Tamper.Tried, ",") != "setup,evaluate" || strings.Join(got.Tamper.Refused, ",") != "setup,evaluate" ||
			strings.Join(got.Flags, ",") != w.flags {
			t.Errorf("task %s: %+v, want %+v", got.TaskName, got, w)
		}
		if !strings.Contains(out, got.TaskName) {
			t.Errorf("proctor env certify printed no line for %s:\n%s", got.TaskName, out)
		}
	}
	// Its job is a job like any other: 3 tasks × (2 oracle + 1 idle + 1 random + 1 tamper) attempts.
	var sum summary
	c.call("GET", "/v2/jobs/"+cert.JobID.String()+"/summary", nil, &sum)
	if sum.TotalTraces != 15 || sum.Completed != 15 {
		t.Errorf("the certification's job: %s", sum.String())
	}

	// An environment that requires a passed certification keeps a flagged build from becoming
	// the latest, unless forced.
	if out, err := c.cli("env", "require-certification", "todo"); err != nil || !strings.Contains(out, "only once its latest certification passed") {
		t.Fatalf("proctor env require-certification: %v\n%s", err, out)
	}
	if out, err := c.cli("env", "set-latest", build); err == nil || !strings.Contains(err.Error(), "requires a passed certification") ||
		!strings.Contains(err.Error(), "no-work (passes_without_work)") {
		t.Errorf("set-latest of a flagged build: %v\n%s", err, out)
	}
	if out, err := c.cli("env", "set-latest", build, "--force"); err != nil || !strings.Contains(out, "latest: build") {
		t.Errorf("set-latest --force: %v\n%s", err, out)
	}
	if out, err := c.cli("env", "require-certification", "todo", "--off"); err != nil || !strings.Contains(out, "any succeeded build") {
		t.Errorf("proctor env require-certification --off: %v\n%s", err, out)
	}

	// A taskset of the sound task alone certifies clean: passed, and the command succeeds.
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "clean", "tasks": []any{task("sound", []string{"buy milk"}, "buy milk")}}, nil)
	if out, err := c.cli("env", "certify", build, "--taskset", "clean", "--k", "2"); err != nil || !strings.Contains(out, ": passed") {
		t.Errorf("proctor env certify of a clean taskset: %v\n%s", err, out)
	}

	// Planted tasks: a grader that trusts what a visible tool writes (the tamper probe claims
	// success through it and scores, where doing nothing does not), and an evaluation that passes
	// 60% of the time (flaky: with k 12, all pass or all fail once in ~450 certifications).
	plantedDir := outOfTreeModule(t, []byte(plantedEnvironment))
	if out, err := c.cli("env", "deploy", plantedDir, "--name", "planted"); err != nil {
		t.Fatalf("deploy the planted environment: %v\n%s", err, out)
	}
	solve := []any{map[string]any{"name": "solve", "arguments": map[string]any{}}}
	if code := c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "planted", "tasks": []any{
		map[string]any{"name": "verdict", "env": "planted", "scenario": "verdict", "validation": solve},
		map[string]any{"name": "coin", "env": "planted", "scenario": "coin", "validation": solve}}}, nil); code != 201 {
		t.Fatalf("upload the planted tasks: %d", code)
	}
	c.call("GET", "/v2/registry?search=planted", nil, &envs)
	if len(envs.Items) != 1 || envs.Items[0].LatestBuildID == nil {
		t.Fatalf("the planted environment: %+v", envs.Items)
	}
	planted := *envs.Items[0].LatestBuildID
	if out, err := c.cli("env", "certify", planted, "--taskset", "planted", "--k", "12"); err == nil || !strings.Contains(out, "tamperable") || !strings.Contains(out, "flaky") {
		t.Errorf("proctor env certify of the planted tasks: %v, want tamperable and flaky\n%s", err, out)
	}
	c.call("GET", "/v2/builds/"+planted+"/certification", nil, &cert)
	for _, ct := range cert.Tasks {
		switch ct.TaskName {
		case "verdict":
			if ct.Tamper == nil || strings.Join(ct.Tamper.Claimed, ",") != "set_verdict" || ct.Tamper.Reward != 1 || !slices.Contains(ct.Flags, "tamperable") ||
				ct.OraclePasses != 12 || slices.Contains(ct.Flags, "flaky") {
				t.Errorf("the verdict task's certification: %+v (tamper %+v)", ct, ct.Tamper)
			}
		case "coin":
			if !slices.Contains(ct.Flags, "flaky") || ct.OracleRuns != 12 || ct.OraclePasses == 0 || ct.OraclePasses == 12 || slices.Contains(ct.Flags, "tamperable") {
				t.Errorf("the coin task's certification: %+v", ct)
			}
		default:
			t.Errorf("a task of no planted kind: %+v", ct)
		}
	}

	// A deploy that asks for its build to be certified (a child of the build's workflow): under
	// the policy, a build whose certification passed becomes the latest; one whose certification
	// is flagged does not, and the deploy fails saying so.
	if out, err := c.cli("env", "require-certification", "todo"); err != nil {
		t.Fatalf("proctor env require-certification: %v\n%s", err, out)
	}
	if out, err := c.cli("env", "deploy", outOfTreeEnvironment(t), "--name", "todo", "--certify", "clean", "--k", "2"); err != nil ||
		!strings.Contains(out, ": passed") || !regexp.MustCompile(`latest: build \d+ of todo; new runs use it`).MatchString(out) {
		t.Errorf("proctor env deploy --certify of a clean build: %v\n%s", err, out)
	}
	if out, err := c.cli("env", "deploy", plantedDir, "--name", "planted", "--certify", "planted", "--k", "2"); err == nil ||
		!strings.Contains(out, "not made the latest of planted (its certification did not pass)") || !strings.Contains(out, "tamperable") {
		t.Errorf("proctor env deploy --certify of a flagged build: %v\n%s", err, out)
	}
	if code, body := c.raw("POST", "/v2/builds/trigger", map[string]any{"build_id": "00000000-0000-0000-0000-000000000009", "name": "x",
		"certify": map[string]any{"taskset_id": "00000000-0000-0000-0000-000000000009"}}); code != 422 || !strings.Contains(body, "body.certify.taskset_id") {
		t.Errorf("a trigger that certifies on a taskset no one sees = %d %s, want 422", code, body)
	}

	// Refusals: a taskset with no task of the build's environment, a nil taskset, no build.
	var other struct {
		ID string `json:"taskset_id"`
	}
	if code := c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "other", "tasks": []any{
		map[string]any{"name": "x", "env": "game2048", "scenario": "reach-tile", "args": map[string]any{"target": 16, "seed": 1}}}}, &other); code != 201 {
		t.Fatalf("upload a 2048 task: %d", code)
	}
	for _, tc := range []struct {
		path string
		body any
		want int
	}{
		{"/v2/builds/" + build + "/certify", map[string]any{"taskset_id": other.ID}, 422},
		{"/v2/builds/" + build + "/certify", map[string]any{"taskset_id": "00000000-0000-0000-0000-000000000000"}, 422},
		{"/v2/builds/" + build + "/certify", map[string]any{"taskset_id": other.ID, "k": 21}, 422},
		{"/v2/builds/00000000-0000-0000-0000-000000000001/certify", map[string]any{"taskset_id": other.ID}, 404},
	} {
		if code, body := c.raw("POST", tc.path, tc.body); code != tc.want {
			t.Errorf("POST %s %v = %d %s, want %d", tc.path, tc.body, code, body, tc.want)
		}
	}
}

// plantedEnvironment plants two faults certification must find: its scenario verdict's grader
// trusts what an agent writes (the visible tool set_verdict records the verdict it scores; the
// work, solve, also earns it), and its scenario coin's evaluation passes 60% of the time once the
// work is done.
const plantedEnvironment = `package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"

	"github.com/proctorhq/proctor/envserver"
)

type verdict struct {
	Passed bool ` + "`json:\"passed\"`" + `
}

func main() {
	envserver.Main(func(logger *slog.Logger) (*envserver.Server, error) {
		var mu sync.Mutex
		passed, solved := false, false
		srv := envserver.New("planted", envserver.WithLogger(logger))
		if _, err := envserver.AddTool(srv, "solve", "Do the work", func(ctx context.Context, _ struct{}) (verdict, error) {
			mu.Lock()
			defer mu.Unlock()
			passed, solved = true, true
			return verdict{Passed: true}, nil
		}); err != nil {
			return nil, err
		}
		if _, err := envserver.AddTool(srv, "set_verdict", "Record the verdict", func(ctx context.Context, in verdict) (verdict, error) {
			mu.Lock()
			defer mu.Unlock()
			passed = in.Passed
			return in, nil
		}); err != nil {
			return nil, err
		}
		evaluate := envserver.NewHub(envserver.EvaluateHub)
		score := func(name string, pass func() bool) error {
			_, err := envserver.AddTool(evaluate, name, "1 when it passes", func(ctx context.Context, _ struct{}) (envserver.EvaluationResult, error) {
				mu.Lock()
				defer mu.Unlock()
				if pass() {
					return envserver.EvaluationResult{Reward: 1, Done: true, Content: "passed"}, nil
				}
				return envserver.EvaluationResult{Reward: 0, Done: true, Content: "not passed"}, nil
			})
			return err
		}
		if err := score("verdict", func() bool { return passed }); err != nil {
			return nil, err
		}
		if err := score("coin", func() bool { return solved && rand.Float64() < 0.6 }); err != nil {
			return nil, err
		}
		if err := srv.Mount(evaluate); err != nil {
			return nil, err
		}
		for _, name := range []string{"verdict", "coin"} {
			if err := envserver.AddScenario(srv, envserver.Scenario[struct{}]{Name: name, Prompt: "Solve it.",
				Evaluate: envserver.Call{Tool: envserver.EvaluateHub, Name: name}}); err != nil {
				return nil, err
			}
		}
		return srv, nil
	})
}
`
