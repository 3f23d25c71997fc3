package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/examples/environments/game2048/game2048env"
	"github.com/proctorhq/proctor/httpapi"
)

// replayMoves are the oracle's moves in every task of the replay check's test.
var replayMoves = []string{"down", "left", "up", "up", "left", "left", "down", "right"}

// firstFourSpawn is the first step (one move a step, from 0) of a game of 2048 with seed whose
// board holds a spawned 4 tile: the board's sum grows by the spawned tile on each move (merges
// keep it), and by 4 or 2 at the deal. -1 when none of replayMoves spawns one.
func firstFourSpawn(seed uint64) int {
	sum := func(g *game2048env.Game) (s int) {
		for _, row := range g.Board {
			for _, v := range row {
				s += v
			}
		}
		return s
	}
	g := game2048env.NewGame(seed)
	if sum(g) != 4 {
		return 0 // a 4 dealt: the first move's board differs
	}
	for i, dir := range replayMoves {
		before := sum(g)
		if _, err := g.Move(dir); err != nil {
			panic(err)
		}
		if sum(g)-before == 4 {
			return i
		}
	}
	return -1
}

// game2048Copy is an out-of-tree copy of the game2048 environment, with one changed rule when
// changed: a spawned tile is always a 2 (the random draw that picked a 4 one time in ten is still
// made, so that every other spawn lands where it did).
func game2048Copy(t *testing.T, changed bool) string {
	t.Helper()
	dir := outOfTreeExample(t, "game2048", true)
	if !changed {
		return dir
	}
	game := filepath.Join(dir, "game2048env", "game.go")
	b, err := os.ReadFile(game)
	if err != nil {
		t.Fatal(err)
	}
	rule := "\tif g.next()%10 == 0 {\n\t\tvalue = 4\n\t}"
	if strings.Count(string(b), rule) != 1 {
		t.Fatalf("game.go no longer has the spawn rule this test changes:\n%s", rule)
	}
	if err := os.WriteFile(game, []byte(strings.Replace(string(b), rule, "\tif g.next()%10 == 0 {\n\t\tvalue = 2\n\t}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// proctor env check replays a finished 2048 job on a new build whose spawn rule changed: exactly
// the tasks whose games spawned a 4 (computed here from the game itself) changed, each from the
// step of that spawn, and the others are the same; replayed on an identical build (the same
// source, built again) and on the build the job ran, every attempt is the same. The replays are
// a job like any other. On Postgres (see oneStore).
func TestAReplayCheckFindsExactlyTheTasksABuildChanged(t *testing.T) {
	changedDir, sameDir := game2048Copy(t, true), game2048Copy(t, false)
	oneStore(t, "postgres", func(t *testing.T, storeArgs []string, _ string) { testReplayCheck(t, storeArgs, changedDir, sameDir) })
}

func testReplayCheck(t *testing.T, storeArgs []string, changedDir, sameDir string) {
	dev := startDev(t, t.TempDir(), storeArgs...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	var tasks []any
	want := map[string]int{}
	validation := []any{}
	for _, dir := range replayMoves {
		validation = append(validation, map[string]any{"name": "move", "arguments": map[string]any{"direction": dir}})
	}
	for seed := uint64(1); seed <= 5; seed++ {
		name := fmt.Sprintf("seed-%d", seed)
		want[name] = firstFourSpawn(seed)
		tasks = append(tasks, map[string]any{"name": name, "env": "game2048", "scenario": "reach-tile",
			"args": map[string]any{"target": 16, "seed": seed}, "validation": validation})
	}
	affected := 0
	for _, step := range want {
		if step >= 0 {
			affected++
		}
	}
	if affected == 0 || affected == len(want) {
		t.Fatalf("the seeds' first 4 spawns %v: the test wants some tasks affected by the rule and some not", want)
	}
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	if code := c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "rules", "tasks": tasks}, &up); code != 201 {
		t.Fatalf("upload the 2048 tasks = %d", code)
	}
	var envs struct {
		Items []environmentRow `json:"items"`
	}
	c.call("GET", "/v2/registry?search=game2048", nil, &envs)
	if len(envs.Items) != 1 || envs.Items[0].LatestBuildID == nil {
		t.Fatalf("the game2048 environment: %+v", envs.Items)
	}
	ran := *envs.Items[0].LatestBuildID
	var launched struct {
		JobID string `json:"job_id"`
	}
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": up.TaskVersionIDs,
		"model_ids": []string{c.resolve("/v2/models/resolve?model=oracle", "id")}, "max_concurrent": 5}, &launched)
	if s := c.waitJob(launched.JobID, nil); s.Completed != 5 {
		t.Fatalf("the 2048 job: %s", s.String())
	}

	out, err := c.cli("env", "deploy", changedDir, "--name", "game2048", "--no-promote")
	if err != nil {
		t.Fatalf("deploy the changed game: %v\n%s", err, out)
	}
	changed := regexp.MustCompile(`set-latest (\S+)`).FindStringSubmatch(out)
	if changed == nil {
		t.Fatalf("no set-latest hint in:\n%s", out)
	}
	out, err = c.cli("env", "check", changed[1], "--against", launched.JobID[:8])
	if err == nil || !regexp.MustCompile(`(\d) of 5 attempts changed their reward or did not finish on this build \((\d) more diverged`).MatchString(err.Error()) {
		t.Errorf("proctor env check of the changed build: %v, want it to fail on changed rewards\n%s", err, out)
	}
	t.Logf("proctor env check of the changed build:\n%s", out)
	full := regexp.MustCompile(`of build (\S+) against`).FindStringSubmatch(out)
	if full == nil {
		t.Fatalf("proctor env check named no build:\n%s", out)
	}
	var chk httpapi.ReplayCheck
	defer func() {
		if t.Failed() {
			for _, tr := range c.traces(chk.JobID.String()) {
				t.Logf("replay %s: %s %s", tr.ID, tr.Status, tr.Error)
			}
		}
	}()
	c.call("GET", "/v2/builds/"+full[1]+"/check", nil, &chk)
	if chk.Status != "changed" || len(chk.Attempts) != 5 || len(chk.NotReplayed) != 0 || chk.AgainstJobID.String() != launched.JobID ||
		!strings.HasPrefix(chk.BuildDigest, "sha256:") {
		t.Fatalf("the check: %+v", chk)
	}
	outcomes := map[string]int{}
	for _, a := range chk.Attempts {
		outcomes[a.Outcome]++
	}
	if counts := regexp.MustCompile(`(\d) of 5 attempts changed.*\((\d) more diverged`).FindStringSubmatch(fmt.Sprint(err)); counts == nil ||
		counts[1] != fmt.Sprint(outcomes["changed_reward"]) || counts[2] != fmt.Sprint(outcomes["diverged"]) ||
		outcomes["changed_reward"]+outcomes["diverged"] != affected {
		t.Errorf("proctor env check said %v; the check's outcomes %v, %d tasks affected", err, outcomes, affected)
	}
	for _, a := range chk.Attempts {
		step, ok := want[a.TaskName]
		switch {
		case !ok:
			t.Errorf("an attempt of no task of the job: %+v", a)
		case step < 0 && (a.Outcome != "same" || a.FirstDivergingStep != nil || *a.RewardAfter != *a.RewardBefore):
			t.Errorf("%s spawned no 4: %+v, want the same", a.TaskName, a)
		case step >= 0 && (a.FirstDivergingStep == nil || *a.FirstDivergingStep != step):
			t.Errorf("%s first spawned a 4 at step %d: %+v", a.TaskName, step, a)
		case step >= 0 && a.Outcome != "diverged" && (a.Outcome != "changed_reward" || *a.RewardAfter == *a.RewardBefore):
			t.Errorf("%s: outcome %s, rewards %v → %v", a.TaskName, a.Outcome, *a.RewardBefore, *a.RewardAfter)
		}
		if line := regexp.MustCompile(`(?m)^` + a.TaskName + `\s+` + a.SourceTraceID.String()[:8] + `\s.*\s` + a.Outcome + `$`); !line.MatchString(out) {
			t.Errorf("proctor env check printed no line for %s (%s):\n%s", a.TaskName, a.Outcome, out)
		}
	}
	// Its job is a job like any other, of replay-model attempts pinned to the checked build.
	var sum summary
	c.call("GET", "/v2/jobs/"+chk.JobID.String()+"/summary", nil, &sum)
	if sum.TotalTraces != 5 || sum.Completed != 5 {
		t.Errorf("the check's job: %s", sum.String())
	}

	// Replayed on an identical build, and on the build the job ran, every attempt is the same.
	out, err = c.cli("env", "deploy", sameDir, "--name", "game2048", "--no-promote")
	if err != nil {
		t.Fatalf("deploy the game again: %v\n%s", err, out)
	}
	same := regexp.MustCompile(`set-latest (\S+)`).FindStringSubmatch(out)
	if same == nil || same[1] == changed[1] {
		t.Fatalf("no set-latest hint of a third build in:\n%s", out)
	}
	for _, build := range []string{same[1], ran} {
		if out, err := c.cli("env", "check", build, "--against", launched.JobID); err != nil || !strings.Contains(out, "all 5 attempts the same") {
			t.Errorf("proctor env check of build %s: %v\n%s", build, err, out)
		}
	}

	// The replay model answers only a check's attempts: a launch of it is refused, saying so.
	replayModel := c.resolve("/v2/models/resolve?model=replay", "id")
	if code, body := c.raw("POST", "/v2/rollouts/run", map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": replayModel}); code != 422 ||
		!strings.Contains(body, "answers only a replay check's attempts") {
		t.Errorf("a run of the replay model = %d %s, want 422", code, body)
	}
	if code, body := c.raw("POST", "/v2/rollouts/submit", map[string]any{"trace_id": uuid.NewString(), "env": "game2048", "task": "seed-1",
		"agent": map[string]any{"type": "replay"}}); code != 422 || !strings.Contains(body, "answers only a replay check's attempts") {
		t.Errorf("a submit of the replay model = %d %s, want 422", code, body)
	}
	if code, body := c.raw("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": up.TaskVersionIDs[:1], "model_ids": []string{replayModel, replayModel}}); code != 422 ||
		!strings.Contains(body, "answers only a replay check's attempts") {
		t.Errorf("a run_list of the replay model alone = %d %s, want 422", code, body)
	}
	// Beside another model, its pairs are rejected with the reason and the other's run.
	var launchedBoth struct {
		Accepted int `json:"accepted"`
		Rejected int `json:"rejected"`
		Results  []struct {
			Error string `json:"error"`
		} `json:"results"`
	}
	if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": up.TaskVersionIDs[:1],
		"model_ids": []string{replayModel, c.resolve("/v2/models/resolve?model=oracle", "id")}}, &launchedBoth); code >= 300 ||
		launchedBoth.Accepted != 1 || launchedBoth.Rejected != 1 || !strings.Contains(fmt.Sprint(launchedBoth.Results), "answers only a replay check's attempts") {
		t.Errorf("a run_list of the replay model and the oracle = %d %+v, want the replay's pair rejected with the reason", code, launchedBoth)
	}

	// Refusals: a job that is not the team's, the nil job, no build, a job still running.
	for _, tc := range []struct {
		path string
		body any
		want int
	}{
		{"/v2/builds/" + ran + "/check", map[string]any{"against_job_id": "00000000-0000-0000-0000-000000000000"}, 422},
		{"/v2/builds/" + ran + "/check", map[string]any{"against_job_id": "00000000-0000-0000-0000-000000000002"}, 422},
		{"/v2/builds/00000000-0000-0000-0000-000000000001/check", map[string]any{"against_job_id": launched.JobID}, 404},
	} {
		if code, body := c.raw("POST", tc.path, tc.body); code != tc.want {
			t.Errorf("POST %s %v = %d %s, want %d", tc.path, tc.body, code, body, tc.want)
		}
	}
}
