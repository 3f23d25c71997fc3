package rollouts

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// LaunchTrace is one attempt to create.
type LaunchTrace struct {
	TraceID       uuid.UUID
	TaskVersionID uuid.UUID
	ModelID       uuid.UUID
	GroupID       string
	Name          string
	// RuntimeConfig overrides the task version's, field by field; nil runs the version's.
	RuntimeConfig *models.RuntimeConfig
	// Args override the scenario arguments of the version key by key; AgentConfig overrides its
	// agent config key by key. Nil runs the version's.
	Args        map[string]any
	AgentConfig *models.AgentConfig
	// AgentBuildID is the brought agent's build to run (ResolveAgent); nil runs the built-in loop.
	AgentBuildID *uuid.UUID
	MaxSteps     int
	Metadata     map[string]any
	// ReplayOf is the attempt whose recorded model answers this one replays (a replay check's).
	ReplayOf *uuid.UUID
}

// Launch creates a job (or adds to the caller's existing one) with its attempts, all pending.
type Launch struct {
	JobID *uuid.UUID
	// Kind is how the job is launched (default JobSingle); a remote job is is_remote. A RunList
	// workflow drives a JobBatch job; the others complete when their last trace ends.
	Kind          string
	Name          string
	TasksetID     *uuid.UUID
	MaxSteps      int
	GroupSize     int
	MaxConcurrent int
	// MaxCostUSD is a run_list job's ceiling on its spend (nil: none).
	MaxCostUSD *float64
	Metadata   models.JobMetadata
	Traces     []LaunchTrace
}

// LaunchJob writes a job and its pending traces in one transaction, before any workflow starts,
// so that a poll right after launching finds them. A trace id the caller's team already has is
// not created again (launches are idempotent on client-minted trace ids); one another team has is
// a conflict.
func (s *Store) LaunchJob(ctx context.Context, c *models.Caller, l Launch) (*models.Job, []models.Trace, error) {
	var job *models.Job
	var traces []models.Trace
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		job, traces, err = launchJob(ctx, tx, c, l)
		return err
	})
	if err != nil {
		if errors.Is(err, models.ErrConflict) || errors.Is(err, models.ErrNotFound) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("launch job: %w", err)
	}
	return job, traces, nil
}

// launchJob is LaunchJob in tx.
func launchJob(ctx context.Context, tx bun.Tx, c *models.Caller, l Launch) (job *models.Job, traces []models.Trace, err error) {
	err = func() error {
		// The launch's reads take a fixed number of queries whatever its size: the traces that
		// exist already, then the versions of the others.
		ids := make([]uuid.UUID, len(l.Traces))
		for i, lt := range l.Traces {
			ids[i] = lt.TraceID
		}
		existing, err := models.RowsByID(ctx, tx, ids, func(t *models.Trace) uuid.UUID { return t.ID })
		if err != nil {
			return err
		}
		if job, err = launchingJob(ctx, tx, c, &l, existing); err != nil {
			return err
		}
		var missing []uuid.UUID
		for _, lt := range l.Traces {
			if _, ok := existing[lt.TraceID]; !ok {
				missing = append(missing, lt.TaskVersionID)
			}
		}
		versions, err := models.RowsByID(ctx, tx, missing, func(v *models.TaskVersion) uuid.UUID { return v.ID })
		if err != nil {
			return err
		}
		if err := checkAgentsInside(ctx, tx, l, versions); err != nil {
			return err
		}
		var fresh []models.Trace
		// A job's traces are in launch order by created_at (see JobTraceIDsPage): each is a
		// microsecond after the one before, however fast they are made.
		at := models.Now()
		for _, lt := range l.Traces {
			if t, ok := existing[lt.TraceID]; ok {
				traces = append(traces, t)
				continue
			}
			v, ok := versions[lt.TaskVersionID]
			if !ok {
				return fmt.Errorf("task version %s: %w", lt.TaskVersionID, models.ErrNotFound)
			}
			t := newTrace(c, job.ID, lt, &v, at)
			at = at.Add(time.Microsecond)
			traces = append(traces, t)
			fresh = append(fresh, t)
		}
		// Two launches racing with the same client-minted id: the second writes nothing.
		return models.InsertInBatches(ctx, tx, fresh, "CONFLICT (id) DO NOTHING")
	}()
	return job, traces, err
}

// checkAgentsInside refuses a launch that runs an agent deployed to run inside the environment
// on a task whose environment does not take agents inside: its version's runtime config says
// not, or says nothing and its environment's latest build does not say so. Two queries at most,
// whatever the launch's size; Rollout checks again when the attempt runs.
func checkAgentsInside(ctx context.Context, tx bun.Tx, l Launch, versions map[uuid.UUID]models.TaskVersion) error {
	var agentIDs []uuid.UUID
	for _, lt := range l.Traces {
		if id := lt.AgentBuildID; id != nil && !slices.Contains(agentIDs, *id) {
			agentIDs = append(agentIDs, *id)
		}
	}
	if len(agentIDs) == 0 {
		return nil
	}
	var agents []models.Build
	if err := tx.NewSelect().Model(&agents).Where("id IN (?)", bun.In(agentIDs)).Scan(ctx); err != nil {
		return err
	}
	inside := map[uuid.UUID]bool{}
	for _, b := range agents {
		inside[b.ID] = b.RuntimeConfig.Inside()
	}
	var regIDs []uuid.UUID
	var checked []models.TaskVersion
	for _, lt := range l.Traces {
		v, ok := versions[lt.TaskVersionID]
		if !ok || lt.AgentBuildID == nil || !inside[*lt.AgentBuildID] {
			continue
		}
		checked = append(checked, v)
		if v.RuntimeConfig.AgentsInside == nil && v.RegistryID != nil && !slices.Contains(regIDs, *v.RegistryID) {
			regIDs = append(regIDs, *v.RegistryID)
		}
	}
	takes := map[uuid.UUID]bool{}
	if len(regIDs) > 0 {
		var rows []struct {
			ID            uuid.UUID           `bun:"id,type:uuid"`
			RuntimeConfig models.BuildRuntime `bun:"runtime_config"`
		}
		if err := tx.NewSelect().TableExpr("registries AS r").Join("JOIN builds AS b ON b.id = r.latest_build_id").
			ColumnExpr("r.id, b.runtime_config").Where("r.id IN (?)", bun.In(regIDs)).Scan(ctx, &rows); err != nil {
			return err
		}
		for _, r := range rows {
			takes[r.ID] = r.RuntimeConfig.AgentsInside != nil && *r.RuntimeConfig.AgentsInside
		}
	}
	for _, v := range checked {
		ok := v.RegistryID != nil && takes[*v.RegistryID]
		if a := v.RuntimeConfig.AgentsInside; a != nil {
			ok = *a
		}
		if !ok {
			return models.ValidationError{{Location: "agent", Value: v.Env, Message: fmt.Sprintf("the agent runs inside the environment, and environment %q "+
				"(of task %q) does not take agents inside: deploy it with proctor env deploy --agents-inside (runtime_config.agents_inside)", v.Env, v.Name)}}
		}
	}
	return nil
}

// launchingJob is the job a launch goes into: the one l.JobID names, or the one every trace of a
// repeated launch (the same client-minted trace ids) is already in, or else a new one, written
// now. A trace or job id another team holds is a conflict (whose it is stays unsaid: ids are one
// namespace, not a way to probe other teams).
func launchingJob(ctx context.Context, tx bun.Tx, c *models.Caller, l *Launch, existing map[uuid.UUID]models.Trace) (*models.Job, error) {
	var jobs []uuid.UUID
	for _, t := range existing {
		if t.TeamID != c.TeamID {
			return nil, fmt.Errorf("trace id %s is taken: %w", t.ID, models.ErrConflict)
		}
		if !slices.Contains(jobs, t.JobID) {
			jobs = append(jobs, t.JobID)
		}
	}
	job := new(models.Job)
	switch {
	case l.JobID != nil:
		err := tx.NewSelect().Model(job).Where("id = ?", *l.JobID).Scan(ctx)
		switch {
		case err == nil && job.TeamID != c.TeamID:
			return nil, fmt.Errorf("job id %s is taken: %w", *l.JobID, models.ErrConflict)
		case err == nil:
			return job, nil
		case !models.IsNoRows(err):
			return nil, err
		}
	case len(l.Traces) > 0 && len(existing) == len(l.Traces) && len(jobs) == 1:
		// A launch repeated with the same trace ids returns the original job and traces rather
		// than creating an empty job beside them.
		if err := tx.NewSelect().Model(job).Where("id = ?", jobs[0]).Scan(ctx); err != nil {
			return nil, err
		}
		return job, nil
	}
	id := uuid.New()
	if l.JobID != nil {
		id = *l.JobID
	}
	l.Metadata = l.Metadata.Listed()
	if l.Kind == "" {
		l.Kind = models.JobSingle
	}
	job = &models.Job{ID: id, TeamID: c.TeamID, CreatedBy: &c.UserID, APIKeyID: c.LaunchKey(), Kind: l.Kind, IsRemote: l.Kind == models.JobRemote, TasksetID: l.TasksetID, Name: l.Name, Status: models.JobPending,
		MaxSteps: l.MaxSteps, GroupSize: l.GroupSize, MaxConcurrent: l.MaxConcurrent, Metadata: l.Metadata,
		MaxCostUSD: l.MaxCostUSD, CreatedAt: models.Now(), UpdatedAt: models.Now()}
	if _, err := tx.NewInsert().Model(job).Exec(ctx); err != nil {
		return nil, err
	}
	return job, nil
}

// newTrace is the pending trace of an attempt of version v in job, created at: the launch's
// runtime config, scenario args and agent config over the version's.
func newTrace(c *models.Caller, job uuid.UUID, lt LaunchTrace, v *models.TaskVersion, at time.Time) models.Trace {
	rc := v.RuntimeConfig
	if lt.RuntimeConfig != nil {
		rc = lt.RuntimeConfig.Over(v.RuntimeConfig)
	}
	if lt.Metadata == nil {
		lt.Metadata = map[string]any{}
	}
	modelID := lt.ModelID
	t := models.Trace{ID: lt.TraceID, TeamID: c.TeamID, JobID: job, TaskID: &v.TaskID, TaskVersionID: &v.ID, ModelID: &modelID,
		GroupID: lt.GroupID, Name: lt.Name, Status: models.TracePending, Metadata: lt.Metadata, RuntimeConfig: rc,
		MaxSteps: lt.MaxSteps, IsValid: true, AgentBuildID: lt.AgentBuildID, ReplayOf: lt.ReplayOf, CreatedAt: at, UpdatedAt: at}
	if lt.Args != nil {
		t.ScenarioArgs = maps.Clone(v.Args)
		if t.ScenarioArgs == nil {
			t.ScenarioArgs = map[string]any{}
		}
		maps.Copy(t.ScenarioArgs, lt.Args)
	}
	if lt.AgentConfig != nil {
		ac := lt.AgentConfig.Over(v.AgentConfig)
		t.AgentConfig = &ac
	}
	if t.Name == "" {
		t.Name = v.Name
	}
	return t
}
