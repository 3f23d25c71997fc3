package httpapi

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
)

// Workflows starts and cancels the rollout engine's workflows; the Temporal client implements it.
type Workflows interface {
	StartRollout(ctx context.Context, traceID uuid.UUID) error
	StartRunList(ctx context.Context, jobID uuid.UUID, maxConcurrent int) error
	CancelTrace(ctx context.Context, traceID uuid.UUID) error
	CancelJob(ctx context.Context, jobID uuid.UUID) (int, error)
}

// Launched answers a launch: the rows exist, the work is queued.
type Launched struct {
	JobID   uuid.UUID `json:"job_id"`
	TraceID uuid.UUID `json:"trace_id"`
	Status  string    `json:"status" enum:"queued"`
}

type launchedOutput struct{ Body Launched }

// RunListResult is one launched (or rejected) task version × model.
type RunListResult struct {
	TaskVersionID uuid.UUID   `json:"task_version_id"`
	ModelID       uuid.UUID   `json:"model_id"`
	Accepted      bool        `json:"accepted"`
	TraceIDs      []uuid.UUID `json:"trace_ids" nullable:"false"`
	Error         string      `json:"error,omitempty"`
}

type runListOutput struct {
	Body struct {
		JobID    uuid.UUID       `json:"job_id"`
		Total    int             `json:"total" doc:"Task version × model pairs asked for"`
		Accepted int             `json:"accepted"`
		Rejected int             `json:"rejected"`
		Results  []RunListResult `json:"results" nullable:"false" doc:"Every pair, or past 1,000 attempts only the rejected pairs (see results_truncated)"`
		// ResultsTruncated keeps the answer to a large launch small: the accepted pairs and
		// their trace ids are read back with GET /v2/jobs/{job_id}/traces.
		ResultsTruncated bool `json:"results_truncated" doc:"Set when the launch made more than 1,000 attempts: results then lists only rejected pairs (at most 1,000); list the job's traces to read the rest"`
	}
}

// runListDetailAttempts is the largest launch whose answer lists every pair with its trace ids.
const runListDetailAttempts = 1000

type statusOutput struct {
	Body struct {
		Status string `json:"status" enum:"accepted"`
	}
}

type cancelJobOutput struct {
	Body struct {
		Cancelled int    `json:"cancelled" doc:"Live attempts asked to cancel (attempts that never started are cancelled at once)"`
		Status    string `json:"status" enum:"accepted"`
	}
}

// JobCancelled is one job of cancel_user_jobs.
type JobCancelled struct {
	JobID     uuid.UUID `json:"job_id"`
	Cancelled int       `json:"cancelled"`
}

type cancelUserJobsOutput struct {
	Body struct {
		JobsCancelled       int            `json:"jobs_cancelled"`
		TotalTasksCancelled int            `json:"total_tasks_cancelled"`
		JobDetails          []JobCancelled `json:"job_details" nullable:"false"`
		Status              string         `json:"status" enum:"accepted"`
	}
}

func (s *Server) requireWorkflows() error {
	if s.workflows == nil {
		return newAPIError(http.StatusServiceUnavailable, "this server runs no rollout engine")
	}
	return nil
}

func (s *Server) registerRollouts() {
	tags := []string{"Rollouts"}
	errs := []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "run-rollout", Method: http.MethodPost, Path: "/rollouts/run", Tags: tags, Summary: "Run one attempt",
		Description: "Creates a job with one trace and queues the attempt. Returns at once; poll the trace.", DefaultStatus: http.StatusCreated, Errors: errs,
	}, authKeyOrSession), s.runRollout)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "run-rollout-list", Method: http.MethodPost, Path: "/rollouts/run_list", Tags: tags, Summary: "Run a batch as one job",
		Description: "Launches group_size attempts of every task version × model, at most max_concurrent live at once, as one job. " +
			"Task versions or models the caller cannot see are rejected per pair; the rest run.",
		DefaultStatus: http.StatusCreated, Errors: errs,
	}, authKeyOrSession), s.runRolloutList)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "submit-rollout", Method: http.MethodPost, Path: "/rollouts/submit", Tags: tags, Summary: "Submit an attempt with client-minted ids",
		Description: "For SDKs that mint their own trace and job ids. Idempotent on trace_id.", DefaultStatus: http.StatusCreated, Errors: errs,
	}, authKeyOrSession), s.submitRollout)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "cancel-rollout", Method: http.MethodPost, Path: "/rollouts/cancel", Tags: tags, Summary: "Cancel an attempt",
		Description: "The attempt reads cancelling, tears its sandbox down, then reads cancelled.", Errors: errs,
	}, authKeyOrSession), s.cancelRollout)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "cancel-job", Method: http.MethodPost, Path: "/rollouts/cancel_job", Tags: tags, Summary: "Cancel every attempt of a job",
		Errors: errs,
	}, authKeyOrSession), s.cancelJob)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "cancel-user-jobs", Method: http.MethodPost, Path: "/rollouts/cancel_user_jobs", Tags: tags, Summary: "Cancel everything the caller has running",
		Description: "Cancels every pending or running job the caller launched.", Errors: []int{http.StatusServiceUnavailable},
	}, authKeyOrSession), s.cancelUserJobs)
}

type runInput struct {
	Body struct {
		TaskVersionID uuid.UUID             `json:"task_version_id"`
		ModelID       uuid.UUID             `json:"model_id"`
		MaxSteps      int                   `json:"max_steps,omitempty" minimum:"1" maximum:"10000" default:"30"`
		RuntimeConfig *models.RuntimeConfig `json:"runtime_config,omitempty" doc:"Overrides the task's, field by field"`
		TraceID       *uuid.UUID            `json:"trace_id,omitempty" doc:"Client-minted id; launching it again is idempotent"`
		TraceName     string                `json:"trace_name,omitempty" maxLength:"200"`
	}
}

// Resolve refuses the nil UUID as a client-minted id.
func (in *runInput) Resolve(huma.Context) []error {
	return nilIDs(map[string]*uuid.UUID{"body.trace_id": in.Body.TraceID})
}

// nilIDs reports each given id that is the nil UUID, which is no one's id.
func nilIDs(ids map[string]*uuid.UUID) []error {
	var errs []error
	for _, loc := range slices.Sorted(maps.Keys(ids)) {
		if id := ids[loc]; id != nil && *id == uuid.Nil {
			errs = append(errs, &huma.ErrorDetail{Location: loc, Message: "the nil UUID is not an id", Value: id.String()})
		}
	}
	return errs
}

// runRollout serves POST /v2/rollouts/run: run one attempt.
func (s *Server) runRollout(ctx context.Context, in *runInput) (*launchedOutput, error) {
	if err := s.requireWorkflows(); err != nil {
		return nil, err
	}
	if err := s.checkSpend(ctx); err != nil {
		return nil, err
	}
	c := callerFrom(ctx)
	if _, err := s.store.GetTaskVersion(ctx, c, in.Body.TaskVersionID); err != nil {
		return nil, storeError(err, "task version")
	}
	if _, err := s.store.GetModel(ctx, c, in.Body.ModelID); err != nil {
		return nil, storeError(err, "model")
	}
	traceID := uuid.New()
	if in.Body.TraceID != nil {
		traceID = *in.Body.TraceID
	}
	lt := models.LaunchTrace{TraceID: traceID, TaskVersionID: in.Body.TaskVersionID, ModelID: in.Body.ModelID, Name: in.Body.TraceName,
		MaxSteps: in.Body.MaxSteps, RuntimeConfig: in.Body.RuntimeConfig}
	md := models.JobMetadata{}
	if m, err := s.store.GetModel(ctx, callerFrom(ctx), in.Body.ModelID); err == nil {
		md.ResolvedAgents = append(md.ResolvedAgents, models.ResolvedAgentOf(m))
	}
	return s.launchOne(ctx, models.Launch{Kind: models.JobSingle, Name: in.Body.TraceName, MaxSteps: in.Body.MaxSteps, Traces: []models.LaunchTrace{lt},
		Metadata: md})
}

// launchOne is the launch path of run and submit: the job and its one trace are written, then the
// attempt's workflow is started.
func (s *Server) launchOne(ctx context.Context, l models.Launch) (*launchedOutput, error) {
	l.GroupSize, l.MaxConcurrent = 1, 1
	job, traces, err := s.store.LaunchJob(ctx, callerFrom(ctx), l)
	if err != nil {
		return nil, storeError(err, "task version")
	}
	if err := s.workflows.StartRollout(ctx, traces[0].ID); err != nil {
		return nil, s.startFailed(ctx, err, traces[0].ID)
	}
	return &launchedOutput{Body: Launched{JobID: job.ID, TraceID: traces[0].ID, Status: "queued"}}, nil
}

type runListInput struct {
	Body struct {
		TasksetID      *uuid.UUID            `json:"taskset_id,omitempty" doc:"Every task of this taskset at its latest version (or give task_version_ids)"`
		TaskVersionIDs []uuid.UUID           `json:"task_version_ids,omitempty" maxItems:"100000"`
		ModelIDs       []uuid.UUID           `json:"model_ids" minItems:"1" maxItems:"50"`
		GroupSize      int                   `json:"group_size,omitempty" minimum:"1" maximum:"1000" default:"1" doc:"Attempts per task version and model; a group shares a group_id"`
		MaxConcurrent  int                   `json:"max_concurrent,omitempty" minimum:"1" maximum:"10000" default:"10" doc:"Attempts live at once"`
		MaxSteps       int                   `json:"max_steps,omitempty" minimum:"1" maximum:"10000" default:"30"`
		Name           string                `json:"name,omitempty" maxLength:"200"`
		RuntimeConfig  *models.RuntimeConfig `json:"runtime_config,omitempty" doc:"Overrides each task's, field by field"`
		ParentJobID    *uuid.UUID            `json:"parent_job_id,omitempty" doc:"Proctor extension: the job this one follows up (a re-run of it, or of some of its attempts), a job the caller can see; recorded as the new job's metadata.parent_job_id"`
	}
}

// Resolve requires exactly one of taskset_id and task_version_ids.
func (in *runListInput) Resolve(huma.Context) []error {
	if errs := nilIDs(map[string]*uuid.UUID{"body.parent_job_id": in.Body.ParentJobID}); errs != nil {
		return errs
	}
	switch {
	case in.Body.TasksetID != nil && len(in.Body.TaskVersionIDs) > 0:
		return []error{&huma.ErrorDetail{Location: "body.task_version_ids", Message: "give taskset_id or task_version_ids, not both"}}
	case in.Body.TasksetID == nil && len(in.Body.TaskVersionIDs) == 0:
		return []error{&huma.ErrorDetail{Location: "body.task_version_ids", Message: "nothing to run: give task_version_ids or a taskset_id"}}
	}
	return nil
}

// checkJobSize refuses a launch of more attempts than the server allows, before any work.
func (s *Server) checkJobSize(versions, models, group int) error {
	if n := versions * models * group; n > s.maxAttempts {
		return validation("body", fmt.Sprintf("this launch asks for %d attempts (%d task versions × %d models × group size %d); "+
			"this server launches at most %d per request (--max-job-attempts): split it into several jobs", n, versions, models, group, s.maxAttempts), nil)
	}
	return nil
}

// runRolloutList serves POST /v2/rollouts/run_list: run a batch as one job. Whatever its size,
// planning takes a fixed number of queries: the taskset's versions in one, explicit ids checked
// in batches, each model once, then the job and its traces written in batches.
func (s *Server) runRolloutList(ctx context.Context, in *runListInput) (*runListOutput, error) {
	if err := s.requireWorkflows(); err != nil {
		return nil, err
	}
	if err := s.checkSpend(ctx); err != nil {
		return nil, err
	}
	c := callerFrom(ctx)
	b := in.Body
	// Explicit ids are counted before any query; a taskset's once its tasks are listed.
	if err := s.checkJobSize(len(b.TaskVersionIDs), len(b.ModelIDs), b.GroupSize); err != nil {
		return nil, err
	}
	versions, visible, err := s.runListVersions(ctx, c, b.TasksetID, b.TaskVersionIDs)
	if err != nil {
		return nil, err
	}
	if err := s.checkJobSize(len(versions), len(b.ModelIDs), b.GroupSize); err != nil {
		return nil, err
	}
	md := models.JobMetadata{ParentJobID: b.ParentJobID}
	if p := b.ParentJobID; p != nil {
		if _, err := s.store.GetJob(ctx, c, *p); err != nil {
			return nil, storeError(err, "parent job "+p.String())
		}
	}
	okModel := map[uuid.UUID]error{}
	for _, m := range b.ModelIDs {
		model, err := s.store.GetModel(ctx, c, m)
		okModel[m] = err
		if err == nil {
			md.ResolvedAgents = append(md.ResolvedAgents, models.ResolvedAgentOf(model))
		}
	}
	out, launch := planRunList(versions, visible, b.ModelIDs, okModel, b.GroupSize, func(v, m uuid.UUID) models.LaunchTrace {
		return models.LaunchTrace{TraceID: uuid.New(), TaskVersionID: v, ModelID: m, GroupID: fmt.Sprintf("%s/%s", v, m),
			MaxSteps: b.MaxSteps, RuntimeConfig: b.RuntimeConfig}
	})
	if len(launch) == 0 {
		return nil, newAPIError(http.StatusNotFound, "none of the task versions and models is visible to the caller")
	}
	job, _, err := s.store.LaunchJob(ctx, c, models.Launch{Kind: models.JobBatch, Name: b.Name, TasksetID: b.TasksetID, MaxSteps: b.MaxSteps, GroupSize: b.GroupSize,
		MaxConcurrent: b.MaxConcurrent, Metadata: md, Traces: launch})
	if err != nil {
		return nil, storeError(err, "task version")
	}
	out.Body.JobID = job.ID
	if err := s.workflows.StartRunList(ctx, job.ID, b.MaxConcurrent); err != nil {
		id := requestIDFrom(ctx)
		s.log.ErrorContext(ctx, "start run list", "request_id", id, "job", job.ID, "error", err)
		return nil, newAPIError(http.StatusServiceUnavailable, "the job was recorded but its workflow could not start (request id "+id+")")
	}
	return out, nil
}

// runListVersions is what a run_list runs: every task of the taskset at its latest version, or
// the explicit ids. Versions listed from a taskset the caller sees need no check of their own
// (visible is nil); explicit ids are checked in batches, and those the caller cannot see are
// rejected one by one in the results.
func (s *Server) runListVersions(ctx context.Context, c *models.Caller, tasksetID *uuid.UUID, ids []uuid.UUID) ([]uuid.UUID, map[uuid.UUID]bool, error) {
	if tasksetID != nil {
		versions, err := s.store.LatestVersionIDs(ctx, c, *tasksetID)
		if err != nil {
			return nil, nil, storeError(err, "taskset")
		}
		if len(versions) == 0 {
			return nil, nil, validation("body.taskset_id", "nothing to run: the taskset has no tasks", tasksetID)
		}
		return versions, nil, nil
	}
	visible, err := s.store.VisibleTaskVersions(ctx, c, ids)
	return ids, visible, err
}

// planRunList pairs every version with every model, group times each: a pair the caller cannot
// see (a version not in visible, when it is checked, or a model whose lookup failed) is a
// rejected result, every other pair's attempts are launched. Past runListDetailAttempts
// attempts, the results list only the rejected pairs.
func planRunList(versions []uuid.UUID, visible map[uuid.UUID]bool, modelIDs []uuid.UUID, okModel map[uuid.UUID]error, group int,
	attempt func(v, m uuid.UUID) models.LaunchTrace) (*runListOutput, []models.LaunchTrace) {
	out := &runListOutput{}
	out.Body.Results = []RunListResult{}
	var launch []models.LaunchTrace
	for _, v := range versions {
		for _, m := range modelIDs {
			res := RunListResult{TaskVersionID: v, ModelID: m, TraceIDs: []uuid.UUID{}}
			switch {
			case visible != nil && !visible[v]:
				res.Error = "no such task version is visible to the caller"
			case okModel[m] != nil:
				res.Error = "no such model is visible to the caller"
			default:
				res.Accepted = true
				for range group {
					lt := attempt(v, m)
					res.TraceIDs = append(res.TraceIDs, lt.TraceID)
					launch = append(launch, lt)
				}
			}
			if res.Accepted {
				out.Body.Accepted++
			} else {
				out.Body.Rejected++
			}
			out.Body.Results = append(out.Body.Results, res)
		}
	}
	out.Body.Total = len(out.Body.Results)
	if len(launch) > runListDetailAttempts {
		out.Body.ResultsTruncated = true
		rejected := make([]RunListResult, 0, min(out.Body.Rejected, runListDetailAttempts))
		for _, r := range out.Body.Results {
			if !r.Accepted && len(rejected) < runListDetailAttempts {
				rejected = append(rejected, r)
			}
		}
		out.Body.Results = rejected
	}
	return out, launch
}

type submitInput struct {
	Body struct {
		TraceID uuid.UUID  `json:"trace_id" doc:"Client-minted; submitting it again is idempotent"`
		JobID   *uuid.UUID `json:"job_id,omitempty" doc:"Client-minted job to add the attempt to (created if new)"`
		Env     string     `json:"env,omitempty" maxLength:"200" doc:"The environment the task runs in: a task given by slug or name is looked up among this environment's tasks, and a task given by id must be of it"`
		Task    string     `json:"task" minLength:"1" maxLength:"500" doc:"A task version id, a task id (its latest version), or a task's external id (slug) or name within env"`
		Agent   struct {
			Type   string              `json:"type" minLength:"1" maxLength:"200" doc:"A model_name or model id"`
			Config *models.AgentConfig `json:"config,omitempty" doc:"Merged over the task's agent config, key by key; max_steps (1..10000, default 30) bounds the model steps"`
		} `json:"agent"`
		Args          map[string]any        `json:"args,omitempty" doc:"The scenario's arguments, merged over the task's, key by key"`
		GroupID       string                `json:"group_id,omitempty" maxLength:"200"`
		RuntimeConfig *models.RuntimeConfig `json:"runtime_config,omitempty" doc:"Overrides the task's, field by field"`
		Slug          string                `json:"slug,omitempty" maxLength:"200" doc:"The trace's name"`
	}
}

// submitMaxSteps is an attempt's step bound when agent.config names none.
const submitMaxSteps = 30

// Resolve refuses the nil UUID as a client-minted id, checks the agent config's patterns and
// reads its max_steps.
func (in *submitInput) Resolve(huma.Context) []error {
	if in.Body.Task == "" {
		// The body did not decode (its schema errors are reported): an unset trace_id here is no
		// nil UUID the client sent.
		return nil
	}
	errs := nilIDs(map[string]*uuid.UUID{"body.trace_id": &in.Body.TraceID, "body.job_id": in.Body.JobID})
	if c := in.Body.Agent.Config; c != nil {
		for _, fe := range c.Check("agent.config") {
			errs = append(errs, fieldDetail("body", fe))
		}
		if _, err := in.maxSteps(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// maxSteps is agent.config.max_steps, or submitMaxSteps when it is absent.
func (in *submitInput) maxSteps() (int, error) {
	c := in.Body.Agent.Config
	if c == nil || c.Extra["max_steps"] == nil {
		return submitMaxSteps, nil
	}
	v := c.Extra["max_steps"]
	f, ok := v.(float64)
	if !ok || f != float64(int(f)) || f < 1 || f > 10000 {
		return 0, &huma.ErrorDetail{Location: "body.agent.config.max_steps", Message: "expected an integer from 1 to 10000", Value: v}
	}
	return int(f), nil
}

// submitRollout serves POST /v2/rollouts/submit: submit an attempt with client-minted ids.
func (s *Server) submitRollout(ctx context.Context, in *submitInput) (*launchedOutput, error) {
	if err := s.requireWorkflows(); err != nil {
		return nil, err
	}
	if err := s.checkSpend(ctx); err != nil {
		return nil, err
	}
	c := callerFrom(ctx)
	b := in.Body
	v, err := s.submittedVersion(ctx, c, b.Env, b.Task)
	if err != nil {
		return nil, err
	}
	m, err := s.store.ResolveModel(ctx, c, b.Agent.Type)
	if err != nil {
		return nil, storeError(err, "model "+b.Agent.Type)
	}
	steps, _ := in.maxSteps() // checked by Resolve
	lt := models.LaunchTrace{TraceID: b.TraceID, TaskVersionID: v.ID, ModelID: m.ID, GroupID: b.GroupID, Name: b.Slug, MaxSteps: steps,
		RuntimeConfig: b.RuntimeConfig, Args: b.Args, AgentConfig: b.Agent.Config}
	md := models.JobMetadata{ResolvedAgents: []models.ResolvedAgent{models.ResolvedAgentOf(m)},
		SDKAgentParams: &models.SDKAgentParams{Type: b.Agent.Type, Config: b.Agent.Config}}
	return s.launchOne(ctx, models.Launch{Kind: models.JobRemote, JobID: b.JobID, MaxSteps: steps, Traces: []models.LaunchTrace{lt}, Metadata: md})
}

// submittedVersion resolves a submit's task: a task version id, a task id (its latest version),
// or an external id or name among the tasks of env the caller sees, preferring the caller's
// team's and external ids over names. Several equally good matches are a 422 asking for an id;
// a failure echoes only the caller's input.
func (s *Server) submittedVersion(ctx context.Context, c *models.Caller, env, task string) (*models.TaskVersion, error) {
	notVisible := func() error {
		if env != "" {
			return newAPIError(http.StatusNotFound, "no task "+bound(task)+" of environment "+bound(env)+" is visible to the caller")
		}
		return newAPIError(http.StatusNotFound, "no task "+bound(task)+" is visible to the caller")
	}
	var versionID uuid.UUID
	if id, err := uuid.Parse(task); err == nil {
		t, err := s.store.GetTask(ctx, c, id)
		if err != nil || t.Task.LatestVersionID == nil {
			return nil, notVisible()
		}
		versionID = *t.Task.LatestVersionID
		if id != t.Task.ID {
			versionID = id // the caller named a version: run exactly it
		}
	} else {
		found, err := s.store.FindTasks(ctx, c, env, task, 2)
		if err != nil {
			return nil, err
		}
		switch {
		case len(found) == 0:
			return nil, notVisible()
		case len(found) == 2 && found[0].Own == found[1].Own && found[0].BySlug == found[1].BySlug:
			return nil, validation("body.task", "several visible tasks have this external id or name; give env, or the task's id", task)
		}
		versionID = *found[0].Task.LatestVersionID
	}
	v, err := s.store.GetTaskVersion(ctx, c, versionID)
	if err != nil {
		return nil, notVisible()
	}
	if env != "" && v.Env != env {
		return nil, validation("body.env", "the task is not of this environment (its env is "+bound(v.Env)+")", env)
	}
	return v, nil
}

type cancelTraceInput struct {
	Body struct {
		TraceID uuid.UUID `json:"trace_id"`
	}
}

// cancelRollout serves POST /v2/rollouts/cancel: cancel an attempt.
func (s *Server) cancelRollout(ctx context.Context, in *cancelTraceInput) (*statusOutput, error) {
	if err := s.requireWorkflows(); err != nil {
		return nil, err
	}
	t, err := s.store.GetTrace(ctx, callerFrom(ctx), in.Body.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	if !t.CanEdit {
		return nil, newAPIError(http.StatusForbidden, "the trace is read-only for the caller")
	}
	if !models.Terminal(t.Status) {
		// The workflow settles it: it tears the sandbox down, then writes cancelled.
		s.store.TransitionTrace(ctx, t.ID, models.TraceUpdate{Status: models.TraceCancelling}) //nolint:errcheck // informational
		if err := s.workflows.CancelTrace(ctx, t.ID); err != nil {
			return nil, err
		}
	}
	out := &statusOutput{}
	out.Body.Status = "accepted"
	return out, nil
}

type cancelJobInput struct {
	Body struct {
		JobID uuid.UUID `json:"job_id"`
	}
}

// cancelJob serves POST /v2/rollouts/cancel_job: cancel every attempt of a job.
func (s *Server) cancelJob(ctx context.Context, in *cancelJobInput) (*cancelJobOutput, error) {
	if err := s.requireWorkflows(); err != nil {
		return nil, err
	}
	j, err := s.store.GetJob(ctx, callerFrom(ctx), in.Body.JobID)
	if err != nil {
		return nil, storeError(err, "job")
	}
	if !j.CanEdit {
		return nil, newAPIError(http.StatusForbidden, "the job is read-only for the caller")
	}
	n, err := s.workflows.CancelJob(ctx, j.ID)
	if err != nil {
		return nil, err
	}
	out := &cancelJobOutput{}
	out.Body.Cancelled, out.Body.Status = n, "accepted"
	return out, nil
}

// cancelUserJobs serves POST /v2/rollouts/cancel_user_jobs: cancel everything the caller has running.
func (s *Server) cancelUserJobs(ctx context.Context, _ *struct{}) (*cancelUserJobsOutput, error) {
	if err := s.requireWorkflows(); err != nil {
		return nil, err
	}
	c := callerFrom(ctx)
	jobs, err := s.store.ActiveJobs(ctx, c)
	if err != nil {
		return nil, err
	}
	out := &cancelUserJobsOutput{}
	out.Body.JobDetails, out.Body.Status = []JobCancelled{}, "accepted"
	for _, j := range jobs {
		if j.CreatedBy == nil || *j.CreatedBy != c.UserID {
			continue
		}
		n, err := s.workflows.CancelJob(ctx, j.ID)
		if err != nil {
			return nil, err
		}
		out.Body.JobsCancelled++
		out.Body.TotalTasksCancelled += n
		out.Body.JobDetails = append(out.Body.JobDetails, JobCancelled{JobID: j.ID, Cancelled: n})
	}
	return out, nil
}

// startFailed records that an attempt's workflow could not start, and answers 503; the cause
// stays in the log.
func (s *Server) startFailed(ctx context.Context, err error, traceID uuid.UUID) error {
	id := requestIDFrom(ctx)
	s.log.ErrorContext(ctx, "start rollout", "request_id", id, "trace", traceID, "error", err)
	s.store.TransitionTrace(ctx, traceID, models.TraceUpdate{Status: models.TraceError, StopReason: models.StopError, //nolint:errcheck // best effort
		Error: "the rollout engine could not start the attempt"})
	s.store.SettleSingleRunJob(ctx, traceID) //nolint:errcheck // best effort: the job must not read pending for ever
	return newAPIError(http.StatusServiceUnavailable, "the attempt was recorded but the rollout engine could not start it (request id "+id+")")
}
