package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

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

// registerRolloutRunList registers the launch of a batch as one job.
func (s *Server) registerRolloutRunList() {
	tags := []string{"Rollouts"}
	errs := []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "run-rollout-list", Method: http.MethodPost, Path: "/rollouts/run_list", Tags: tags, Summary: "Run a batch as one job",
		Description: "Launches group_size attempts of every task version × model, at most max_concurrent live at once, as one job. " +
			"Task versions or models the caller cannot see are rejected per pair; the rest run.",
		DefaultStatus: http.StatusCreated, Errors: errs,
	}, authKeyOrSession), s.runRolloutList)
}

type runListInput struct {
	Body struct {
		TasksetID         *uuid.UUID            `json:"taskset_id,omitempty" doc:"Every task of this taskset at its latest version (or give task_version_ids)"`
		TaskVersionIDs    []uuid.UUID           `json:"task_version_ids,omitempty" maxItems:"100000"`
		ModelIDs          []uuid.UUID           `json:"model_ids" minItems:"1" maxItems:"50"`
		GroupSize         int                   `json:"group_size,omitempty" minimum:"1" maximum:"1000" default:"1" doc:"Attempts per task version and model; a group shares a group_id"`
		MaxConcurrent     int                   `json:"max_concurrent,omitempty" minimum:"1" maximum:"10000" default:"10" doc:"Attempts live at once"`
		MaxSteps          int                   `json:"max_steps,omitempty" minimum:"1" maximum:"10000" default:"30"`
		Name              string                `json:"name,omitempty" maxLength:"200"`
		RuntimeConfig     *models.RuntimeConfig `json:"runtime_config,omitempty" doc:"Overrides each task's, field by field"`
		ParentJobID       *uuid.UUID            `json:"parent_job_id,omitempty" doc:"Proctor extension: the job this one follows up (a re-run of it, or of some of its attempts), a job the caller can see; recorded as the new job's metadata.parent_job_id"`
		MaxCostUSD        *float64              `json:"max_cost_usd,omitempty" exclusiveMinimum:"0" maximum:"1000000000" doc:"Proctor extension: a ceiling in USD on what the job spends (its attempts' model calls through the gateway and their environment time, priced as GET /v2/jobs/{job_id}/usage prices them). Once its spend reaches it, the job starts no attempt and reads paused, and its running attempts stop at their next model call (cancelled, stop_reason budget, unscored); raising the ceiling (PATCH /v2/jobs/{job_id}) or POST /v2/jobs/{job_id}/resume goes on with the attempts that never started. Absent: no ceiling."`
		TimeoutMultiplier float64               `json:"timeout_multiplier,omitempty" minimum:"0.1" maximum:"100" doc:"Proctor extension: scales each attempt's run_timeout_s and startup_timeout_s, and a Harbor task's verifier and healthcheck times (for slower hardware or a slower model), recorded as the job's metadata.timeout_multiplier; absent: 1"`
		Agent             string                `json:"agent,omitempty" maxLength:"300" doc:"Proctor extension: a brought agent to run beside each environment instead of the built-in agent loop: its name or id (its latest build), NAME:VERSION or NAME@DIGEST. Each attempt's agent calls that attempt's model through the gateway. Absent: the built-in loop."`
		AgentConfig       *models.AgentConfig   `json:"agent_config,omitempty" doc:"Proctor extension: merged over each task's agent config, key by key (allowed_tools, disallowed_tools, system_prompt; other keys are kept for agents that read them: a brought agent reads the merged config as PROCTOR_AGENT_CONFIG). Absent: each task's own."`
	}
}

// Resolve requires exactly one of taskset_id and task_version_ids.
func (in *runListInput) Resolve(huma.Context) []error {
	if errs := nilIDs(map[string]*uuid.UUID{"body.parent_job_id": in.Body.ParentJobID}); errs != nil {
		return errs
	}
	if c := in.Body.AgentConfig; c != nil {
		var errs []error
		for _, fe := range c.Check("agent_config") {
			errs = append(errs, fieldDetail("body", fe))
		}
		if errs != nil {
			return errs
		}
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
	if err := s.canLaunch(ctx); err != nil {
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
	agentBuild, err := s.resolveAgent(ctx, b.Agent, b.ModelIDs...)
	if err != nil {
		return nil, err
	}
	md := models.JobMetadata{ParentJobID: b.ParentJobID}
	if b.TimeoutMultiplier != 0 && b.TimeoutMultiplier != 1 {
		md.TimeoutMultiplier = b.TimeoutMultiplier
	}
	if p := b.ParentJobID; p != nil {
		if _, err := s.rollouts.GetJob(ctx, c, *p); err != nil {
			return nil, storeError(err, "parent job "+p.String())
		}
	}
	okModel := map[uuid.UUID]error{}
	for _, m := range b.ModelIDs {
		model, err := s.llms.GetModel(ctx, c, m)
		if err == nil && model.Adapter == models.AdapterReplay {
			err = errReplayOnly
		}
		okModel[m] = err
		if err == nil {
			md.ResolvedAgents = append(md.ResolvedAgents, rollouts.ResolvedAgentOf(model))
		}
	}
	out, launch := planRunList(versions, visible, b.ModelIDs, okModel, b.GroupSize, func(v, m uuid.UUID) rollouts.LaunchTrace {
		return rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: v, ModelID: m, GroupID: fmt.Sprintf("%s/%s", v, m),
			MaxSteps: b.MaxSteps, RuntimeConfig: b.RuntimeConfig, AgentConfig: b.AgentConfig, AgentBuildID: agentBuild}
	})
	if len(launch) == 0 {
		replayOnly := len(okModel) > 0
		for _, err := range okModel {
			replayOnly = replayOnly && errors.Is(err, errReplayOnly)
		}
		if replayOnly {
			return nil, validation("body.model_ids", errReplayOnly.Error(), b.ModelIDs[0].String())
		}
		return nil, newAPIError(http.StatusNotFound, "none of the task versions and models is visible to the caller")
	}
	job, _, err := s.rollouts.LaunchJob(ctx, c, rollouts.Launch{Kind: models.JobBatch, Name: b.Name, TasksetID: b.TasksetID, MaxSteps: b.MaxSteps, GroupSize: b.GroupSize,
		MaxConcurrent: b.MaxConcurrent, MaxCostUSD: b.MaxCostUSD, Metadata: md, Traces: launch})
	if err != nil {
		return nil, storeError(err, "task version")
	}
	out.Body.JobID = job.ID
	if err := s.workflows.StartRunList(ctx, job.ID, b.MaxConcurrent); err != nil {
		return nil, s.notStarted(ctx, "the job", job.ID, err)
	}
	return out, nil
}

// errReplayOnly refuses the replay model to a launch: it answers only a replay check's attempts,
// each of which names the attempt it replays.
var errReplayOnly = errors.New("the replay model answers only a replay check's attempts (POST /v2/builds/{build_id}/check, proctor env check): launch another model")

// notStarted is the answer (503, with the request's id, logged) to a request whose record was
// written but whose workflow could not start; what names the record, id is its id.
func (s *Server) notStarted(ctx context.Context, what string, id uuid.UUID, err error) error {
	rid := requestIDFrom(ctx)
	s.log.ErrorContext(ctx, "start workflow", "request_id", rid, "of", what, "id", id, "error", err)
	return newAPIError(http.StatusServiceUnavailable, what+" was recorded but its workflow could not start (request id "+rid+")")
}

// runListVersions is what a run_list runs: every task of the taskset at its latest version, or
// the explicit ids. Versions listed from a taskset the caller sees need no check of their own
// (visible is nil); explicit ids are checked in batches, and those the caller cannot see are
// rejected one by one in the results.
func (s *Server) runListVersions(ctx context.Context, c *models.Caller, tasksetID *uuid.UUID, ids []uuid.UUID) ([]uuid.UUID, map[uuid.UUID]bool, error) {
	if tasksetID != nil {
		versions, err := s.catalog.LatestVersionIDs(ctx, c, *tasksetID)
		if err != nil {
			return nil, nil, storeError(err, "taskset")
		}
		if len(versions) == 0 {
			return nil, nil, validation("body.taskset_id", "nothing to run: the taskset has no tasks", tasksetID)
		}
		return versions, nil, nil
	}
	visible, err := s.catalog.VisibleTaskVersions(ctx, c, ids)
	return ids, visible, err
}

// planRunList pairs every version with every model, group times each: a pair the caller cannot
// see (a version not in visible, when it is checked, or a model whose lookup failed) is a
// rejected result, every other pair's attempts are launched. Past runListDetailAttempts
// attempts, the results list only the rejected pairs.
func planRunList(versions []uuid.UUID, visible map[uuid.UUID]bool, modelIDs []uuid.UUID, okModel map[uuid.UUID]error, group int,
	attempt func(v, m uuid.UUID) rollouts.LaunchTrace) (*runListOutput, []rollouts.LaunchTrace) {
	out := &runListOutput{}
	out.Body.Results = []RunListResult{}
	var launch []rollouts.LaunchTrace
	for _, v := range versions {
		for _, m := range modelIDs {
			res := RunListResult{TaskVersionID: v, ModelID: m, TraceIDs: []uuid.UUID{}}
			switch {
			case visible != nil && !visible[v]:
				res.Error = "no such task version is visible to the caller"
			case errors.Is(okModel[m], errReplayOnly):
				res.Error = okModel[m].Error()
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
