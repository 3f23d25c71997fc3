package httpapi

import (
	"context"
	"maps"
	"net/http"
	"slices"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// Workflows starts and cancels the rollout engine's workflows; the Temporal client implements it.
type Workflows interface {
	StartRollout(ctx context.Context, traceID uuid.UUID) error
	StartRunList(ctx context.Context, jobID uuid.UUID, maxConcurrent int) error
	// RetryRunList runs a job's retried attempts, from their place in its launch order.
	RetryRunList(ctx context.Context, jobID uuid.UUID, maxConcurrent, from int) error
	CancelTrace(ctx context.Context, traceID uuid.UUID) error
	CancelJob(ctx context.Context, jobID uuid.UUID) (int, error)
	// ResumeJob tells a job's RunLists that it was resumed (its store row says so already).
	ResumeJob(ctx context.Context, jobID uuid.UUID) error
	// StartCertification starts a build's certification, which runs its job.
	StartCertification(ctx context.Context, certificationID, jobID uuid.UUID, maxConcurrent int) error
	// StartReplayCheck starts a build's replay check, which runs its job.
	StartReplayCheck(ctx context.Context, checkID, jobID uuid.UUID, maxConcurrent int) error
}

// Launched answers a launch: the rows exist, the work is queued.
type Launched struct {
	JobID   uuid.UUID `json:"job_id"`
	TraceID uuid.UUID `json:"trace_id"`
	Status  string    `json:"status" enum:"queued"`
}

type launchedOutput struct{ Body Launched }

func (s *Server) requireWorkflows() error {
	if s.workflows == nil {
		return newAPIError(http.StatusServiceUnavailable, "this server runs no rollout engine")
	}
	return nil
}

// registerRollouts registers the launch of one attempt: run, and submit with client-minted ids.
func (s *Server) registerRollouts() {
	tags := []string{"Rollouts"}
	errs := []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "run-rollout", Method: http.MethodPost, Path: "/rollouts/run", Tags: tags, Summary: "Run one attempt",
		Description: "Creates a job with one trace and queues the attempt. Returns at once; poll the trace.", DefaultStatus: http.StatusCreated, Errors: errs,
	}, authKeyOrSession), s.runRollout)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "submit-rollout", Method: http.MethodPost, Path: "/rollouts/submit", Tags: tags, Summary: "Submit an attempt with client-minted ids",
		Description: "For SDKs that mint their own trace and job ids. Idempotent on trace_id.", DefaultStatus: http.StatusCreated, Errors: errs,
	}, authKeyOrSession), s.submitRollout)
}

type runInput struct {
	Body struct {
		TaskVersionID uuid.UUID             `json:"task_version_id"`
		ModelID       uuid.UUID             `json:"model_id"`
		MaxSteps      int                   `json:"max_steps,omitempty" minimum:"1" maximum:"10000" default:"30"`
		RuntimeConfig *models.RuntimeConfig `json:"runtime_config,omitempty" doc:"Overrides the task's, field by field"`
		TraceID       *uuid.UUID            `json:"trace_id,omitempty" doc:"Client-minted id; launching it again is idempotent"`
		TraceName     string                `json:"trace_name,omitempty" maxLength:"200"`
		Agent         string                `json:"agent,omitempty" maxLength:"300" doc:"Proctor extension: a brought agent to run beside the environment instead of the built-in agent loop: its name or id (its latest build), NAME:VERSION or NAME@DIGEST. It calls model_id through the gateway. Absent: the built-in loop."`
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
	if err := s.canLaunch(ctx); err != nil {
		return nil, err
	}
	c := callerFrom(ctx)
	if _, err := s.catalog.GetTaskVersion(ctx, c, in.Body.TaskVersionID); err != nil {
		return nil, storeError(err, "task version")
	}
	if m, err := s.llms.GetModel(ctx, c, in.Body.ModelID); err != nil {
		return nil, storeError(err, "model")
	} else if m.Adapter == models.AdapterReplay {
		return nil, validation("body.model_id", errReplayOnly.Error(), in.Body.ModelID.String())
	}
	agentBuild, err := s.resolveAgent(ctx, in.Body.Agent, in.Body.ModelID)
	if err != nil {
		return nil, err
	}
	traceID := uuid.New()
	if in.Body.TraceID != nil {
		traceID = *in.Body.TraceID
	}
	lt := rollouts.LaunchTrace{TraceID: traceID, TaskVersionID: in.Body.TaskVersionID, ModelID: in.Body.ModelID, Name: in.Body.TraceName,
		MaxSteps: in.Body.MaxSteps, RuntimeConfig: in.Body.RuntimeConfig, AgentBuildID: agentBuild}
	md := models.JobMetadata{}
	if m, err := s.llms.GetModel(ctx, callerFrom(ctx), in.Body.ModelID); err == nil {
		md.ResolvedAgents = append(md.ResolvedAgents, rollouts.ResolvedAgentOf(m))
	}
	return s.launchOne(ctx, rollouts.Launch{Kind: models.JobSingle, Name: in.Body.TraceName, MaxSteps: in.Body.MaxSteps, Traces: []rollouts.LaunchTrace{lt},
		Metadata: md})
}

// launchOne is the launch path of run and submit: the job and its one trace are written, then the
// attempt's workflow is started.
func (s *Server) launchOne(ctx context.Context, l rollouts.Launch) (*launchedOutput, error) {
	l.GroupSize, l.MaxConcurrent = 1, 1
	job, traces, err := s.rollouts.LaunchJob(ctx, callerFrom(ctx), l)
	if err != nil {
		return nil, storeError(err, "task version")
	}
	if err := s.workflows.StartRollout(ctx, traces[0].ID); err != nil {
		return nil, s.startFailed(ctx, err, traces[0].ID)
	}
	return &launchedOutput{Body: Launched{JobID: job.ID, TraceID: traces[0].ID, Status: "queued"}}, nil
}

type submitInput struct {
	Body struct {
		TraceID uuid.UUID  `json:"trace_id" doc:"Client-minted; submitting it again is idempotent"`
		JobID   *uuid.UUID `json:"job_id,omitempty" doc:"Client-minted job to add the attempt to (created if new)"`
		Env     string     `json:"env,omitempty" maxLength:"200" doc:"The environment the task runs in: a task given by slug or name is looked up among this environment's tasks, and a task given by id must be of it"`
		Task    string     `json:"task" minLength:"1" maxLength:"500" doc:"A task version id, a task id (its latest version), or a task's external id (slug) or name within env"`
		Agent   struct {
			Type   string              `json:"type" minLength:"1" maxLength:"200" doc:"A brought agent of the team (its name or id, NAME:VERSION or NAME@DIGEST; a Proctor extension), else a model_name or model id for the built-in agent loop"`
			Config *models.AgentConfig `json:"config,omitempty" doc:"Merged over the task's agent config, key by key; max_steps (1..10000, default 30) bounds the model steps; for a brought agent, model (a model_name or id) is the model it may call (required)"`
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
	if err := s.canLaunch(ctx); err != nil {
		return nil, err
	}
	c := callerFrom(ctx)
	b := in.Body
	v, err := s.submittedVersion(ctx, c, b.Env, b.Task)
	if err != nil {
		return nil, err
	}
	agentBuild, m, err := s.submittedAgent(ctx, b.Agent.Type, b.Agent.Config)
	if err != nil {
		return nil, err
	}
	steps, _ := in.maxSteps() // checked by Resolve
	lt := rollouts.LaunchTrace{TraceID: b.TraceID, TaskVersionID: v.ID, ModelID: m.ID, GroupID: b.GroupID, Name: b.Slug, MaxSteps: steps,
		RuntimeConfig: b.RuntimeConfig, Args: b.Args, AgentConfig: b.Agent.Config, AgentBuildID: agentBuild}
	md := models.JobMetadata{ResolvedAgents: []models.ResolvedAgent{rollouts.ResolvedAgentOf(m)},
		SDKAgentParams: &models.SDKAgentParams{Type: b.Agent.Type, Config: b.Agent.Config}}
	return s.launchOne(ctx, rollouts.Launch{Kind: models.JobRemote, JobID: b.JobID, MaxSteps: steps, Traces: []rollouts.LaunchTrace{lt}, Metadata: md})
}

// submittedAgent resolves a submit's agent.type: a brought agent of the caller's team first,
// which calls the model agent.config.model names; else a model, run by the built-in loop.
func (s *Server) submittedAgent(ctx context.Context, typ string, config *models.AgentConfig) (*uuid.UUID, *models.LLMModel, error) {
	c := callerFrom(ctx)
	isAgent, err := s.registry.IsAgent(ctx, c, typ)
	if err != nil {
		return nil, nil, err
	}
	if !isAgent {
		m, err := s.llms.ResolveModel(ctx, c, typ)
		if err != nil {
			return nil, nil, storeError(err, "model "+typ)
		}
		if m.Adapter == models.AdapterReplay {
			return nil, nil, validation("body.agent.type", errReplayOnly.Error(), typ)
		}
		return nil, m, nil
	}
	var model string
	if config != nil {
		model, _ = config.Extra["model"].(string)
	}
	if model == "" {
		return nil, nil, validation("body.agent.config.model", "agent "+bound(typ)+" is a brought agent: name the model it may call in agent.config.model (a model_name or id)", nil)
	}
	m, err := s.llms.ResolveModel(ctx, c, model)
	if err != nil {
		return nil, nil, storeError(err, "model "+model)
	}
	build, err := s.resolveAgent(ctx, typ, m.ID)
	if err != nil {
		return nil, nil, err
	}
	return build, m, nil
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
		t, err := s.catalog.GetTask(ctx, c, id)
		if err != nil || t.Task.LatestVersionID == nil {
			return nil, notVisible()
		}
		versionID = *t.Task.LatestVersionID
		if id != t.Task.ID {
			versionID = id // the caller named a version: run exactly it
		}
	} else {
		found, err := s.catalog.FindTasks(ctx, c, env, task, 2)
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
	v, err := s.catalog.GetTaskVersion(ctx, c, versionID)
	if err != nil {
		return nil, notVisible()
	}
	if env != "" && v.Env != env {
		return nil, validation("body.env", "the task is not of this environment (its env is "+bound(v.Env)+")", env)
	}
	return v, nil
}

// startFailed records that an attempt's workflow could not start, and answers 503; the cause
// stays in the log.
func (s *Server) startFailed(ctx context.Context, err error, traceID uuid.UUID) error {
	id := requestIDFrom(ctx)
	s.log.ErrorContext(ctx, "start rollout", "request_id", id, "trace", traceID, "error", err)
	s.rollouts.TransitionTrace(ctx, traceID, rollouts.TraceUpdate{Status: models.TraceError, StopReason: models.StopError, //nolint:errcheck // best effort
		Error: "the rollout engine could not start the attempt"})
	s.rollouts.SettleSingleRunJob(ctx, traceID) //nolint:errcheck // best effort: the job must not read pending for ever
	return newAPIError(http.StatusServiceUnavailable, "the attempt was recorded but the rollout engine could not start it (request id "+id+")")
}
