package rollouts_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
)

// recordTurns writes an attempt's conversation: per step, the model's answer (one move) and the
// environment's tool result, then a final answer.
func recordTurns(t *testing.T, s *models.Store, traceID uuid.UUID, results ...string) {
	t.Helper()
	at := time.Now().UTC()
	if _, err := rollouts.Of(s).TransitionTrace(ctx, traceID, rollouts.TraceUpdate{Status: models.TraceInitializing, Attempt: 1, StartTime: &at}); err != nil {
		t.Fatal(err)
	}
	var evs []models.TraceEvent
	for i, text := range results {
		call := agent.ToolCall{ID: "call_" + string(rune('a'+i)), Name: "move", Arguments: map[string]any{"direction": "left"}}
		evs = append(evs, models.TraceEvent{TraceID: traceID, Seq: 2 * i, Attempt: 1, Kind: models.EventAssistant, StartedAt: at,
			Data: models.EventData(models.AssistantEventData{Step: i, Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}})},
			models.TraceEvent{TraceID: traceID, Seq: 2*i + 1, Attempt: 1, Kind: models.EventToolResult, StartedAt: at,
				Data: models.EventData(models.ToolResultEventData{Step: i, CallID: call.ID, Name: "move", Message: agent.Message{Role: agent.RoleTool, Content: text},
					Structured: map[string]any{"board": text, "score": i}})})
	}
	evs = append(evs, models.TraceEvent{TraceID: traceID, Seq: 2 * len(results), Attempt: 1, Kind: models.EventAssistant, StartedAt: at,
		Data: models.EventData(models.AssistantEventData{Step: len(results), Message: agent.Message{Role: agent.RoleAssistant, Content: "done"}})})
	// A lost try's writer that went on after its try was superseded: left out of the record.
	evs = append(evs, models.TraceEvent{TraceID: traceID, Seq: 2*len(results) + 1, Attempt: 0, Kind: models.EventToolResult, StartedAt: at,
		Data: models.EventData(models.ToolResultEventData{Step: 0, Name: "move", Message: agent.Message{Role: agent.RoleTool, Content: "a lost try's board"}})})
	if err := rollouts.Of(s).AppendTraceEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
}

// A replay check launches one attempt per scored attempt of the built-in loop on the build's
// environment, each pinned to the checked build and naming the attempt it replays, whose
// recorded answers the replay model is given; it lists what it left out, and why. Once its job
// ended each replay is compared with its source: same, diverged (a tool result differs at a
// step), changed_reward, unfinished. Both stores.
func TestAReplayCheckComparesEachReplayWithTheAttemptItReplays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		game, err := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "game"})
		if err != nil {
			t.Fatal(err)
		}
		other, err := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "other"})
		if err != nil {
			t.Fatal(err)
		}
		var builds []*models.Build
		for i, reg := range []uuid.UUID{game.ID, game.ID, other.ID} {
			bd, err := registry.Of(s).CreateBuild(ctx, reg, registry.NewBuild{Status: registry.BuildSucceeded, Digest: "sha256:" + string(rune('a'+i)),
				ImageName: []string{"game:1", "game:2", "other:1"}[i], Scenarios: []models.Scenario{{Name: "play"}}})
			if err != nil {
				t.Fatal(err)
			}
			builds = append(builds, bd)
		}
		if _, err := s.DB.NewUpdate().Model((*models.Build)(nil)).Set("image_key = 'images/x.tar'").Where("id IN (?)",
			bun.In([]uuid.UUID{builds[0].ID, builds[1].ID, builds[2].ID})).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		up, err := catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetName: "games", Tasks: []catalog.TaskUpload{
			{TaskContent: models.TaskContent{Name: "reach-8", Env: "game", Scenario: "play"}},
			{TaskContent: models.TaskContent{Name: "reach-16", Env: "game", Scenario: "play"}},
			{TaskContent: models.TaskContent{Name: "elsewhere", Env: "other", Scenario: "play"}}}})
		if err != nil {
			t.Fatal(err)
		}
		oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
		if err := llms.Of(s).UpsertModel(ctx, oracle); err != nil {
			t.Fatal(err)
		}
		v8, v16, vOther := up.TaskVersionIDs[0], up.TaskVersionIDs[1], up.TaskVersionIDs[2]
		lts := []rollouts.LaunchTrace{}
		for _, v := range []uuid.UUID{v8, v16, v16, vOther, v8} {
			lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: v, ModelID: oracle.ID, GroupID: "g", MaxSteps: 7,
				Args: map[string]any{"seed": 3}})
		}
		job, traces, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{Kind: models.JobBatch, Name: "games", TasksetID: &up.TasksetID, MaxSteps: 7, GroupSize: 1, MaxConcurrent: 2, Traces: lts})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rollouts.Of(s).StartReplayCheck(ctx, a, builds[1].ID, job.ID, 0); !errors.Is(err, models.ErrConflict) {
			t.Errorf("a check against a job whose attempts have not ended: %v, want ErrConflict", err)
		}
		one, zero := 1.0, 0.0
		recordTurns(t, s, traces[0].ID, "board 8a", "board 8b")
		recordTurns(t, s, traces[1].ID, "board 16a", "board 16b", "board 16c")
		rollouts.Of(s).TransitionTrace(ctx, traces[0].ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
		rollouts.Of(s).TransitionTrace(ctx, traces[1].ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
		rollouts.Of(s).TransitionTrace(ctx, traces[2].ID, rollouts.TraceUpdate{Status: models.TraceError, Error: "no host", InfraFailure: true})
		rollouts.Of(s).TransitionTrace(ctx, traces[3].ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
		rollouts.Of(s).TransitionTrace(ctx, traces[4].ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &zero})
		// The last attempt ran a brought agent (its model calls are not a conversation to replay).
		if _, err := s.DB.NewUpdate().Model((*models.Trace)(nil)).Set("agent_build_id = ?", builds[2].ID).Where("id = ?", traces[4].ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		rollouts.Of(s).SetJobStatus(ctx, job.ID, models.JobCompleted)

		if _, err := rollouts.Of(s).StartReplayCheck(ctx, a, builds[1].ID, job.ID, 0); !errors.Is(err, models.ErrConflict) || !strings.Contains(err.Error(), "no replay model") {
			t.Errorf("a check with no replay model in the catalog: %v, want ErrConflict saying so", err)
		}
		if err := llms.Of(s).UpsertModel(ctx, &models.LLMModel{ModelName: rollouts.ReplayModelName, Name: "Replay", Provider: "proctor", Adapter: models.AdapterReplay}); err != nil {
			t.Fatal(err)
		}
		var verr models.ValidationError
		if _, err := rollouts.Of(s).StartReplayCheck(ctx, b, builds[1].ID, job.ID, 0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team's build: %v, want ErrNotFound", err)
		}
		if _, err := rollouts.Of(s).StartReplayCheck(ctx, a, builds[1].ID, uuid.New(), 0); !errors.As(err, &verr) {
			t.Errorf("no such job: %v, want a validation error", err)
		}
		if _, err := rollouts.Of(s).StartReplayCheck(ctx, a, builds[1].ID, job.ID, 1); !errors.As(err, &verr) || !strings.Contains(err.Error(), "replays 2 attempts") {
			t.Errorf("a check over the server's bound: %v, want a validation error", err)
		}

		chk, err := rollouts.Of(s).StartReplayCheck(ctx, a, builds[1].ID, job.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		reasons := map[uuid.UUID]string{}
		for _, n := range chk.NotReplayed {
			reasons[n.TraceID] = n.Reason
		}
		if len(reasons) != 3 || reasons[traces[2].ID] != rollouts.NotReplayedUnscored || reasons[traces[3].ID] != rollouts.NotReplayedOtherEnvironment ||
			reasons[traces[4].ID] != rollouts.NotReplayedBroughtAgent {
			t.Errorf("not replayed: %+v", chk.NotReplayed)
		}
		replays, _, err := rollouts.Of(s).ListJobTraces(ctx, a, chk.JobID, 100, 0)
		if err != nil || len(replays) != 2 {
			t.Fatalf("the check's job: %d attempts, %v; want the 2 scored attempts on game", len(replays), err)
		}
		bySource := map[uuid.UUID]rollouts.TraceRow{}
		for _, r := range replays {
			if r.ReplayOf == nil {
				t.Fatalf("replay %s names no attempt it replays", r.ID)
			}
			bySource[*r.ReplayOf] = r
			run, err := rollouts.Of(s).LoadRun(ctx, r.ID)
			if err != nil || run.Build == nil || run.Build.ID != builds[1].ID || run.Model == nil || run.Model.Adapter != models.AdapterReplay ||
				r.MaxSteps != 7 || r.ScenarioArgs["seed"] != float64(3) {
				t.Errorf("replay %s loads %+v, %v (trace %+v); want build 2, the replay model, the source's steps and args", r.ID, run, err, r)
			}
		}
		answers, err := rollouts.Of(s).RecordedAnswers(ctx, traces[1].ID)
		if err != nil || len(answers) != 4 || answers[0].ToolCalls[0].ID != "call_a" || answers[3].Content != "done" {
			t.Errorf("recorded answers: %+v, %v", answers, err)
		}
		// The replay of reach-8 answers the same; reach-16's second move gives another board, and
		// the reward drops.
		r8, r16 := bySource[traces[0].ID], bySource[traces[1].ID]
		recordTurns(t, s, r8.ID, "board 8a", "board 8b")
		recordTurns(t, s, r16.ID, "board 16a", "board 16B", "board 16c")
		rollouts.Of(s).TransitionTrace(ctx, r8.ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
		rollouts.Of(s).TransitionTrace(ctx, r16.ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &zero})
		rollouts.Of(s).SetJobStatus(ctx, chk.JobID, models.JobCompleted)
		done, err := rollouts.Of(s).FinishReplayCheck(ctx, chk.ID)
		if err != nil || done.Status != rollouts.ReplayChanged || done.FinishedAt == nil || len(done.Attempts) != 2 {
			t.Fatalf("finished: %+v, %v", done, err)
		}
		for _, at := range done.Attempts {
			switch at.SourceTraceID {
			case traces[0].ID:
				if at.Outcome != rollouts.ReplayOutcomeSame || at.FirstDivergingStep != nil || at.TaskName != "reach-8" || *at.RewardAfter != 1 {
					t.Errorf("reach-8: %+v, want same", at)
				}
			case traces[1].ID:
				if at.Outcome != rollouts.ReplayOutcomeChangedReward || at.FirstDivergingStep == nil || *at.FirstDivergingStep != 1 ||
					*at.RewardBefore != 1 || *at.RewardAfter != 0 || at.ReplayTraceID != r16.ID {
					t.Errorf("reach-16: %+v, want changed_reward from step 1", at)
				}
			default:
				t.Errorf("an attempt of no source: %+v", at)
			}
		}
		if got, err := rollouts.Of(s).LatestReplayCheck(ctx, a, builds[1].ID); err != nil || got.ID != chk.ID || got.Status != rollouts.ReplayChanged || len(got.Attempts) != 2 {
			t.Errorf("latest check = %+v, %v", got, err)
		}
		if _, err := rollouts.Of(s).LatestReplayCheck(ctx, b, builds[1].ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team reads the check: %v", err)
		}
		if _, err := rollouts.Of(s).StartReplayCheck(ctx, a, builds[2].ID, chk.JobID, 0); !errors.As(err, &verr) || !strings.Contains(err.Error(), "nothing to replay") {
			t.Errorf("a check against a job with no attempt on the build's environment: %v, want a validation error", err)
		}
		if again, err := rollouts.Of(s).FinishReplayCheck(ctx, chk.ID); err != nil || again.FinishedAt.Sub(*done.FinishedAt).Abs() > time.Millisecond {
			t.Errorf("a second finish: %+v, %v", again, err)
		}

		// A second check: reach-8's replay ends a step short (its tool result missing) with the
		// same reward, diverged; reach-16's ends in error, unfinished. A third is cancelled: failed.
		second, err := rollouts.Of(s).StartReplayCheck(ctx, a, builds[1].ID, job.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		replays, _, _ = rollouts.Of(s).ListJobTraces(ctx, a, second.JobID, 100, 0)
		for _, r := range replays {
			if *r.ReplayOf == traces[0].ID {
				recordTurns(t, s, r.ID, "board 8a")
				rollouts.Of(s).TransitionTrace(ctx, r.ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
			} else {
				rollouts.Of(s).TransitionTrace(ctx, r.ID, rollouts.TraceUpdate{Status: models.TraceError, Error: "environment crashed"})
			}
		}
		rollouts.Of(s).SetJobStatus(ctx, second.JobID, models.JobCompleted)
		done, err = rollouts.Of(s).FinishReplayCheck(ctx, second.ID)
		if err != nil {
			t.Fatal(err)
		}
		var outcomes []string
		for _, at := range done.Attempts {
			step := -1
			if at.FirstDivergingStep != nil {
				step = *at.FirstDivergingStep
			}
			outcomes = append(outcomes, at.TaskName+":"+at.Outcome+":"+string(rune('0'+step+1)))
		}
		if want := []string{"reach-16:unfinished:1", "reach-8:diverged:2"}; !slices.Equal(outcomes, want) || done.Status != rollouts.ReplayChanged {
			t.Errorf("second check: %v (%s), want %v", outcomes, done.Status, want)
		}
		third, err := rollouts.Of(s).StartReplayCheck(ctx, a, builds[1].ID, job.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		rollouts.Of(s).SetJobStatus(ctx, third.JobID, models.JobCancelled)
		if res, err := rollouts.Of(s).FinishReplayCheck(ctx, third.ID); err != nil || res.Status != rollouts.ReplayFailed {
			t.Errorf("a cancelled check: %+v, %v", res, err)
		}
	})
}
