package rollouts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

// ReplayModelName is the model name of the platform's replay model: it answers each model call
// of an attempt with the answer the attempt it replays (Trace.ReplayOf) recorded at that step.
const ReplayModelName = "replay"

// Replay check statuses: running while its job runs; then same (every replayed attempt got the
// same tool results and reward), changed (some did not), or failed (its job was cancelled
// before every attempt ended).
const (
	ReplayRunning = "running"
	ReplaySame    = "same"
	ReplayChanged = "changed"
	ReplayFailed  = "failed"
)

// Outcomes of one replayed attempt.
const (
	// ReplayOutcomeSame: every tool result and the reward are as recorded.
	ReplayOutcomeSame = "same"
	// ReplayOutcomeChangedReward: the reward differs (whatever the tool results did).
	ReplayOutcomeChangedReward = "changed_reward"
	// ReplayOutcomeDiverged: some tool result differs, the reward does not.
	ReplayOutcomeDiverged = "diverged"
	// ReplayOutcomeUnfinished: the replay ended without a reward (an error, a cancel).
	ReplayOutcomeUnfinished = "unfinished"
)

// Why an attempt of the job checked against was not replayed.
const (
	NotReplayedUnscored         = "not_scored"
	NotReplayedOtherEnvironment = "other_environment"
	NotReplayedBroughtAgent     = "brought_agent"
)

// replaySource is an attempt of the job a check replays.
type replaySource struct {
	models.Trace `bun:",extend"`
	TaskName     string     `bun:"task_name,scanonly"`
	RegistryID   *uuid.UUID `bun:"registry_id,scanonly,type:uuid"`
}

// notReplayed is why a check of a build of environment registryID leaves the attempt out, ""
// when it replays it.
func (src *replaySource) notReplayed(registryID uuid.UUID) string {
	switch {
	case src.RegistryID == nil || *src.RegistryID != registryID:
		return NotReplayedOtherEnvironment
	case src.Status != models.TraceCompleted || src.Reward == nil || src.TaskVersionID == nil:
		return NotReplayedUnscored
	case src.AgentBuildID != nil:
		return NotReplayedBroughtAgent
	}
	return ""
}

// StartReplayCheck launches a regression replay of a build against a finished job of the
// caller's team: one attempt per scored attempt of the job whose task runs the build's
// environment, on the same task version, scenario arguments, agent configuration and step
// bound, pinned to the build (by its image), run by the replay model; the caller starts its
// workflow. One transaction.
func (s *Store) StartReplayCheck(ctx context.Context, c *models.Caller, buildID, againstJobID uuid.UUID, maxAttempts int) (*models.ReplayCheck, error) {
	b, err := s.ownImageBuild(ctx, c, buildID, "checked")
	if err != nil {
		return nil, err
	}
	job, err := s.GetJob(ctx, c, againstJobID)
	if err != nil && !errors.Is(err, models.ErrNotFound) {
		return nil, err
	}
	if err != nil || job.TeamID != c.TeamID { // published jobs of other teams are not replayed
		return nil, models.ValidationError{{Location: "against_job_id", Value: againstJobID.String(), Message: "no job with this id is the caller's team's"}}
	}
	var sources []replaySource
	if err := s.DB.NewSelect().Model(&sources).ColumnExpr("tr.*").ColumnExpr("COALESCE(tk.name, '') AS task_name, tv.registry_id AS registry_id").
		Join("LEFT JOIN tasks AS tk ON tk.id = tr.task_id").Join("LEFT JOIN task_versions AS tv ON tv.id = tr.task_version_id").
		Where("tr.job_id = ?", againstJobID).OrderExpr("tk.name, tr.created_at, tr.id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	// Its attempts must have ended (the job's own status follows a moment later).
	live := 0
	for _, src := range sources {
		if !Terminal(src.Status) {
			live++
		}
	}
	if live > 0 {
		return nil, fmt.Errorf("job %s has %d attempts that have not ended: a build is checked against a job whose attempts have: %w", againstJobID, live, models.ErrConflict)
	}
	builtin, err := s.builtinModels(ctx, ReplayModelName)
	if err != nil {
		return nil, err
	}
	pin := b.Pin()
	chk := &models.ReplayCheck{ID: uuid.New(), TeamID: c.TeamID, BuildID: buildID, BuildDigest: b.Digest, AgainstJobID: againstJobID, Status: ReplayRunning,
		Attempts: []models.ReplayedAttempt{}, NotReplayed: []models.NotReplayed{}, CreatedAt: models.Now()}
	var launch []LaunchTrace
	for _, src := range sources {
		if why := src.notReplayed(b.RegistryID); why != "" {
			chk.NotReplayed = append(chk.NotReplayed, models.NotReplayed{TraceID: src.ID, TaskName: src.TaskName, Reason: why})
			continue
		}
		rc := src.RuntimeConfig
		rc.Image = pin.Image
		replayOf := src.ID
		launch = append(launch, LaunchTrace{TraceID: uuid.New(), TaskVersionID: *src.TaskVersionID, ModelID: builtin[ReplayModelName], GroupID: src.GroupID,
			RuntimeConfig: &rc, Args: src.ScenarioArgs, AgentConfig: src.AgentConfig, MaxSteps: src.MaxSteps, ReplayOf: &replayOf})
	}
	if len(launch) == 0 {
		return nil, models.ValidationError{{Location: "against_job_id", Value: againstJobID.String(),
			Message: fmt.Sprintf("job %s has no scored attempt of the built-in agent loop on environment %s, build %d's: nothing to replay", againstJobID, b.RegistryName, b.Version)}}
	}
	if maxAttempts > 0 && len(launch) > maxAttempts {
		return nil, models.ValidationError{{Location: "against_job_id", Value: againstJobID.String(), Message: fmt.Sprintf(
			"this check replays %d attempts; this server launches at most %d per request", len(launch), maxAttempts)}}
	}
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		j, _, err := launchJob(ctx, tx, c, Launch{Kind: models.JobBatch, Name: fmt.Sprintf("check %s build %d against job %s", b.RegistryName, b.Version, againstJobID.String()[:8]),
			TasksetID: job.TasksetID, MaxSteps: job.MaxSteps, GroupSize: job.GroupSize, MaxConcurrent: ReplayConcurrency, Traces: launch})
		if err != nil {
			return err
		}
		chk.JobID = j.ID
		_, err = tx.NewInsert().Model(chk).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	return chk, nil
}

// ReplayConcurrency is how many of a replay check's attempts run at once.
const ReplayConcurrency = 8

// RecordedAnswers are the model's answers of an attempt's standing try, in order: what the
// replay model answers an attempt that replays it with.
func (s *Store) RecordedAnswers(ctx context.Context, traceID uuid.UUID) ([]agent.Message, error) {
	var evs []models.TraceEvent
	if err := standingTry(s.DB.NewSelect().Model(&evs)).Where("trace_id = ? AND kind = ?", traceID, models.EventAssistant).
		Order("seq ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("recorded answers of %s: %w", traceID, err)
	}
	out := make([]agent.Message, 0, len(evs))
	for _, ev := range evs {
		var d models.AssistantEventData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, fmt.Errorf("recorded answer %d of %s: %w", ev.Seq, traceID, err)
		}
		out = append(out, d.Message)
	}
	return out, nil
}

// standingTry keeps, of a query of trace events (aliased ev, the model's alias), those of their
// trace's standing try: not superseded, and of the try the trace now names (a lost try's writer
// may append after its try was superseded).
func standingTry(q *bun.SelectQuery) *bun.SelectQuery {
	return q.Where("NOT ev.superseded AND ev.attempt = (SELECT tr.attempt FROM traces AS tr WHERE tr.id = ev.trace_id)")
}

// FinishReplayCheck compares each replay of a check whose job has ended with the attempt it
// replays, and records them with the check's status: failed when the job was cancelled, changed
// when an attempt is not the same, same otherwise. A finished check stays as it was.
func (s *Store) FinishReplayCheck(ctx context.Context, id uuid.UUID) (*models.ReplayCheck, error) {
	chk := new(models.ReplayCheck)
	if err := s.DB.NewSelect().Model(chk).Where("chk.id = ?", id).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "replay check")
	}
	if chk.Status != ReplayRunning {
		return chk, nil
	}
	var job models.Job
	if err := s.DB.NewSelect().Model(&job).Column("status").Where("id = ?", chk.JobID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "the replay check's job")
	}
	var rows []struct {
		ID            uuid.UUID  `bun:"id,type:uuid"`
		ReplayOf      *uuid.UUID `bun:"replay_of,type:uuid"`
		TaskVersionID uuid.UUID  `bun:"task_version_id,type:uuid"`
		TaskName      string     `bun:"task_name"`
		Status        string     `bun:"status"`
		Reward        *float64   `bun:"reward"`
		Before        *float64   `bun:"before"`
	}
	if err := s.DB.NewSelect().TableExpr("traces AS tr").Join("LEFT JOIN traces AS src ON src.id = tr.replay_of").
		Join("LEFT JOIN tasks AS tk ON tk.id = tr.task_id").
		ColumnExpr("tr.id, tr.replay_of, tr.task_version_id, COALESCE(tk.name, '') AS task_name, tr.status, tr.reward, src.reward AS before").
		Where("tr.job_id = ?", chk.JobID).OrderExpr("tk.name, tr.created_at, tr.id").Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("finish replay check: %w", err)
	}
	ids := make([]uuid.UUID, 0, 2*len(rows))
	for _, r := range rows {
		ids = append(ids, r.ID)
		if r.ReplayOf != nil {
			ids = append(ids, *r.ReplayOf)
		}
	}
	results, err := s.toolResults(ctx, ids)
	if err != nil {
		return nil, err
	}
	chk.Attempts, chk.Status = make([]models.ReplayedAttempt, 0, len(rows)), ReplaySame
	for _, r := range rows {
		a := models.ReplayedAttempt{TaskVersionID: r.TaskVersionID, TaskName: r.TaskName, ReplayTraceID: r.ID, RewardBefore: r.Before, RewardAfter: r.Reward}
		if r.ReplayOf != nil {
			a.SourceTraceID = *r.ReplayOf
			a.FirstDivergingStep = firstDivergingStep(results[*r.ReplayOf], results[r.ID])
		}
		switch {
		case r.ReplayOf == nil: // the attempt it replayed was deleted since
			a.Outcome = ReplayOutcomeUnfinished
		case r.Status != models.TraceCompleted || r.Reward == nil:
			a.Outcome = ReplayOutcomeUnfinished
		case r.Before == nil || *r.Before != *r.Reward:
			a.Outcome = ReplayOutcomeChangedReward
		case a.FirstDivergingStep != nil:
			a.Outcome = ReplayOutcomeDiverged
		default:
			a.Outcome = ReplayOutcomeSame
		}
		if a.Outcome != ReplayOutcomeSame {
			chk.Status = ReplayChanged
		}
		chk.Attempts = append(chk.Attempts, a)
	}
	if job.Status == models.JobCancelled {
		chk.Status = ReplayFailed
	}
	at := models.Now()
	chk.FinishedAt = &at
	if _, err := s.DB.NewUpdate().Model(chk).Column("status", "attempts", "finished_at").
		Where("id = ? AND status = ?", id, ReplayRunning).Exec(ctx); err != nil {
		return nil, fmt.Errorf("finish replay check: %w", err)
	}
	return chk, nil
}

// toolResult is what a replay compares of one tool result: whether it failed, what the model
// was sent (text and images, by digest) and its structured content.
type toolResult struct {
	Step       int
	IsError    bool
	Text       string
	Images     []string
	Structured json.RawMessage
}

func (r toolResult) equal(o toolResult) bool {
	return r.Step == o.Step && r.IsError == o.IsError && r.Text == o.Text && slices.Equal(r.Images, o.Images) && bytes.Equal(r.Structured, o.Structured)
}

// toolResults are what a replay compares of the tool results of the standing tries of the
// traces ids, by trace, in order.
func (s *Store) toolResults(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]toolResult, error) {
	data, err := s.toolResultData(ctx, ids, standingTry)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID][]toolResult, len(data))
	for id, results := range data {
		for _, d := range results {
			structured, err := json.Marshal(d.Structured) // map keys sorted: equal objects, equal bytes
			if err != nil {
				return nil, err
			}
			r := toolResult{Step: d.Step, IsError: d.IsError, Text: d.Message.Content, Structured: structured}
			for _, im := range append(d.Message.Images, d.Images...) {
				r.Images = append(r.Images, im.SHA256)
			}
			out[id] = append(out[id], r)
		}
	}
	return out, nil
}

// toolResultData are the tool result events of the traces ids that keep lets through, decoded,
// by trace, in order; a few hundred traces a query.
func (s *Store) toolResultData(ctx context.Context, ids []uuid.UUID, keep func(*bun.SelectQuery) *bun.SelectQuery) (map[uuid.UUID][]models.ToolResultEventData, error) {
	out := make(map[uuid.UUID][]models.ToolResultEventData, len(ids))
	for chunk := range slices.Chunk(ids, 500) {
		var evs []models.TraceEvent
		if err := keep(s.DB.NewSelect().Model(&evs).Column("trace_id", "seq", "data")).
			Where("ev.trace_id IN (?) AND ev.kind = ?", bun.In(chunk), models.EventToolResult).Order("ev.trace_id", "ev.seq").Scan(ctx); err != nil {
			return nil, fmt.Errorf("tool results: %w", err)
		}
		for _, ev := range evs {
			var d models.ToolResultEventData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("tool result %d of %s: %w", ev.Seq, ev.TraceID, err)
			}
			out[ev.TraceID] = append(out[ev.TraceID], d)
		}
	}
	return out, nil
}

// notSuperseded keeps, of a query of trace events, those of tries that were not superseded.
func notSuperseded(q *bun.SelectQuery) *bun.SelectQuery { return q.Where("NOT ev.superseded") }

// firstDivergingStep is the step of the first tool result in which a replay (after) differs from
// the attempt it replays (before), or which only one of them has; nil when they agree throughout.
func firstDivergingStep(before, after []toolResult) *int {
	for i := range max(len(before), len(after)) {
		switch {
		case i >= len(before):
			return &after[i].Step
		case i >= len(after):
			return &before[i].Step
		case !before[i].equal(after[i]):
			step := min(before[i].Step, after[i].Step)
			return &step
		}
	}
	return nil
}

// LatestReplayCheck is the newest replay check of a build the caller's team ran.
func (s *Store) LatestReplayCheck(ctx context.Context, c *models.Caller, buildID uuid.UUID) (*models.ReplayCheck, error) {
	if _, err := registry.Of(s.Store).GetBuildFor(ctx, c, buildID); err != nil {
		return nil, err
	}
	chk := new(models.ReplayCheck)
	if err := s.DB.NewSelect().Model(chk).Where("chk.build_id = ? AND chk.team_id = ?", buildID, c.TeamID).
		OrderExpr("chk.created_at DESC").Limit(1).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "replay check of build "+buildID.String())
	}
	return chk, nil
}
