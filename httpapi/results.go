package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/llms"
)

func (s *Server) registerResults() {
	tags := []string{"Models"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-model-results", Method: http.MethodGet, Path: "/models/{model_id}/results", Tags: tags, Summary: "A model's results per taskset",
		Description: "Over the caller's team's completed, valid attempts of the model with a reward, run by the built-in agent loop (a brought " +
			"agent's attempts measure the agent: GET /v2/jobs/{job_id}/mix lists them per agent and model) (only those answered by the given " +
			"checkpoints, when `checkpoint_ids` lists some): per taskset, each task's mean reward and the mean of those (`avg_score`). " +
			"`tasks_in_range_A_B` counts the tasks whose mean reward, as a percent, lies in [A, B]: `0_99` not yet mastered, `5_75` " +
			"solved sometimes but not mostly, `15_40` the hard-but-reachable band. `suggested` lists suites the model has not run on.",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getModelResults)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-suggested-tasksets", Method: http.MethodGet, Path: "/models/{model_id}/suggested-tasksets", Tags: tags,
		Summary:     "Tasksets a model has not run on",
		Description: "Tasksets with tasks that the caller may run (the team's, shared and public) on which the caller's team has no attempt of the model, most recently updated first.",
		Errors:      []int{http.StatusNotFound},
	}, authKeyOrSession), s.listSuggestedTasksets)
}

// SuggestedTaskset is a suite a model has not run on.
type SuggestedTaskset struct {
	TasksetID   uuid.UUID `json:"taskset_id"`
	TasksetName string    `json:"taskset_name"`
	IsPublic    bool      `json:"is_public"`
	TaskCount   int       `json:"task_count"`
	Purpose     string    `json:"purpose" enum:"EVAL,TRAINING"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// TaskScore is a model's score on one task.
type TaskScore struct {
	TaskID     uuid.UUID `json:"task_id"`
	TaskName   string    `json:"task_name"`
	AvgScore   float64   `json:"avg_score"`
	MinScore   float64   `json:"min_score"`
	MaxScore   float64   `json:"max_score"`
	TraceCount int       `json:"trace_count"`
	// EnvironmentBuilds and TaskVersions say what its mean pools.
	EnvironmentBuilds int `json:"environment_builds" doc:"Extension: how many environment builds (by digest) its attempts ran; over 1, its mean pools builds that may not measure the same (GET /v2/jobs/compare pairs by build)"`
	TaskVersions      int `json:"task_versions" doc:"Extension: how many versions of the task its attempts ran"`
}

// ModelResult is a model's results on one taskset.
type ModelResult struct {
	TasksetID        uuid.UUID   `json:"taskset_id"`
	TasksetName      string      `json:"taskset_name"`
	IsPublic         bool        `json:"is_public"`
	Purpose          string      `json:"purpose" enum:"EVAL,TRAINING" doc:"Extension: the taskset's purpose"`
	TotalTasks       int         `json:"total_tasks"`
	TasksWithTraces  int         `json:"tasks_with_traces"`
	AvgScore         float64     `json:"avg_score" doc:"the mean over the tasks with traces of each task's mean reward"`
	TasksInRange0_99 int         `json:"tasks_in_range_0_99" doc:"tasks whose mean reward is 0–99%: not yet mastered"`
	TasksInRange5_75 int         `json:"tasks_in_range_5_75" doc:"tasks whose mean reward is 5–75%: solved sometimes, not mostly"`
	TasksInRange1540 int         `json:"tasks_in_range_15_40" doc:"tasks whose mean reward is 15–40%: hard but reachable"`
	MinTracesPer     int         `json:"min_traces_per_task"`
	MaxTracesPer     int         `json:"max_traces_per_task"`
	PerTaskScores    []TaskScore `json:"per_task_scores" nullable:"false"`
	Mixed            bool        `json:"mixed" doc:"Extension: true when some task's mean pools attempts of several environment builds or task versions (its per_task_scores entry says how many): shown, not silently averaged"`
}

type modelResultsInput struct {
	ModelID       uuid.UUID `path:"model_id"`
	CheckpointIDs string    `query:"checkpoint_ids" maxLength:"4000" doc:"comma-separated checkpoint ids of the model"`
	Purpose       string    `query:"purpose" enum:"EVAL,TRAINING" doc:"only tasksets of this purpose"`
}

type modelResultsOutput struct {
	Body struct {
		ModelID       uuid.UUID          `json:"model_id"`
		Results       []ModelResult      `json:"results" nullable:"false"`
		Suggested     []SuggestedTaskset `json:"suggested" nullable:"false"`
		CheckpointIDs []uuid.UUID        `json:"checkpoint_ids" nullable:"false"`
	}
}

// idList parses a comma-separated list of ids (a 422 names the query parameter).
func idList(param, s string) ([]uuid.UUID, error) {
	out := []uuid.UUID{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, err := uuid.Parse(part)
		if err != nil {
			return nil, validation("query."+param, "not a comma-separated list of UUIDs", part)
		}
		out = append(out, id)
	}
	return out, nil
}

// getModelResults serves GET /v2/models/{model_id}/results.
func (s *Server) getModelResults(ctx context.Context, in *modelResultsInput) (*modelResultsOutput, error) {
	c := callerFrom(ctx)
	cps, err := idList("checkpoint_ids", in.CheckpointIDs)
	if err != nil {
		return nil, err
	}
	rs, err := s.llms.ModelResults(ctx, c, in.ModelID, cps, in.Purpose)
	if err != nil {
		return nil, storeErrorIn(err, "query", "model")
	}
	sug, err := s.llms.SuggestTasksets(ctx, c, in.ModelID, llms.SuggestQuery{Purpose: in.Purpose, Limit: 10})
	if err != nil {
		return nil, storeError(err, "model")
	}
	out := &modelResultsOutput{}
	b := &out.Body
	b.ModelID, b.CheckpointIDs, b.Suggested = in.ModelID, cps, suggestedOut(sug)
	b.Results = make([]ModelResult, len(rs))
	for i, r := range rs {
		per := make([]TaskScore, len(r.PerTask))
		for j, p := range r.PerTask {
			per[j] = TaskScore{TaskID: p.TaskID, TaskName: p.TaskName, AvgScore: p.AvgScore, MinScore: p.MinScore, MaxScore: p.MaxScore, TraceCount: p.Traces,
				EnvironmentBuilds: p.Builds, TaskVersions: p.Versions}
		}
		b.Results[i] = ModelResult{TasksetID: r.TasksetID, TasksetName: r.TasksetName, IsPublic: r.IsPublic, Purpose: r.Purpose,
			TotalTasks: r.TotalTasks, TasksWithTraces: r.TasksWithTraces, AvgScore: r.AvgScore, TasksInRange0_99: r.InRange[0],
			TasksInRange5_75: r.InRange[1], TasksInRange1540: r.InRange[2], MinTracesPer: r.MinTracesPerTask, MaxTracesPer: r.MaxTracesPerTask,
			PerTaskScores: per, Mixed: r.Mixed}
	}
	return out, nil
}

func suggestedOut(sug []llms.SuggestedTaskset) []SuggestedTaskset {
	out := make([]SuggestedTaskset, len(sug))
	for i, t := range sug {
		out[i] = SuggestedTaskset{TasksetID: t.TasksetID, TasksetName: t.TasksetName, IsPublic: t.IsPublic, TaskCount: t.TaskCount,
			Purpose: t.Purpose, UpdatedAt: t.UpdatedAt}
	}
	return out
}

type suggestedInput struct {
	ModelID uuid.UUID `path:"model_id"`
	Exclude string    `query:"exclude" maxLength:"4000" doc:"comma-separated taskset ids to leave out"`
	Search  string    `query:"search" maxLength:"200" doc:"a part of the taskset's name"`
	Limit   int       `query:"limit" minimum:"1" maximum:"500" default:"50"`
	Purpose string    `query:"purpose" enum:"EVAL,TRAINING"`
}

type suggestedOutput struct {
	Body struct {
		Suggested []SuggestedTaskset `json:"suggested" nullable:"false"`
	}
}

// listSuggestedTasksets serves GET /v2/models/{model_id}/suggested-tasksets.
func (s *Server) listSuggestedTasksets(ctx context.Context, in *suggestedInput) (*suggestedOutput, error) {
	exclude, err := idList("exclude", in.Exclude)
	if err != nil {
		return nil, err
	}
	sug, err := s.llms.SuggestTasksets(ctx, callerFrom(ctx), in.ModelID, llms.SuggestQuery{Exclude: exclude, Search: in.Search, Purpose: in.Purpose, Limit: in.Limit})
	if err != nil {
		return nil, storeError(err, "model")
	}
	out := &suggestedOutput{}
	out.Body.Suggested = suggestedOut(sug)
	return out, nil
}
