package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/catalog"
)

// MoveFailure is one id of a batch move that did not move.
type MoveFailure struct {
	Input      string     `json:"input" doc:"The id or slug as sent"`
	Reason     string     `json:"reason"`
	Code       string     `json:"code" enum:"not_found,forbidden,taskset_required,stage_incomplete,no_stages,unknown_stage,not_pending,stage_skip"`
	ResolvedID *uuid.UUID `json:"resolved_id" doc:"The task the input resolved to, when it did"`
}

// MoveResult is the per-id outcome of a non-atomic batch move.
type MoveResult struct {
	Failures  []MoveFailure `json:"failures" nullable:"false"`
	Succeeded []uuid.UUID   `json:"succeeded" nullable:"false"`
	Unchanged []uuid.UUID   `json:"unchanged" nullable:"false"`
}

func moveResult(r *catalog.MoveResult) MoveResult {
	out := MoveResult{Failures: []MoveFailure{}, Succeeded: r.Succeeded, Unchanged: r.Unchanged}
	if out.Succeeded == nil {
		out.Succeeded = []uuid.UUID{}
	}
	if out.Unchanged == nil {
		out.Unchanged = []uuid.UUID{}
	}
	for _, f := range r.Failures {
		out.Failures = append(out.Failures, MoveFailure{Input: f.Input, Reason: f.Reason, Code: f.Code, ResolvedID: f.ResolvedID})
	}
	return out
}

type moveOutput struct{ Body MoveResult }

// registerTaskReview registers the batch moves of tasks through review: status and stage.
func (s *Server) registerTaskReview() {
	tags := []string{"Tasks"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "set-task-status", Method: http.MethodPatch, Path: "/tasks/status", Tags: tags,
		Summary: "Set tasks' review status",
		Description: "Per id and non-atomic: each id lands in succeeded, unchanged or failures. A taskset with stages " +
			"requires its last stage before ready; clear=true returns tasks to pending and resets their stage.",
		Errors: []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.setTaskStatus)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "move-task-stage", Method: http.MethodPatch, Path: "/tasks/stage", Tags: tags,
		Summary:     "Move tasks between stages",
		Description: "Advances pending tasks one stage or sends them back to an earlier one. Per id and non-atomic.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.moveTaskStage)
}

type statusInput struct {
	Body struct {
		Clear     bool        `json:"clear,omitempty" doc:"Clear the review: back to pending, stage reset"`
		IDs       []uuid.UUID `json:"ids,omitempty" maxItems:"10000" doc:"Task ids (a task version id resolves to its task)"`
		Slugs     []string    `json:"slugs,omitempty" maxItems:"10000" doc:"Task names or external ids within taskset_id"`
		Status    string      `json:"status,omitempty" enum:"pending,ready,verified,revision,rejected"`
		TasksetID *uuid.UUID  `json:"taskset_id,omitempty" doc:"The taskset slugs are looked up in"`
		Reviewed  bool        `json:"reviewed,omitempty" doc:"Accepted for compatibility; not used"`
	}
}

// Resolve holds the rules across fields that the schema cannot state.
func (in *statusInput) Resolve(huma.Context) []error {
	var errs []error
	if !in.Body.Clear && in.Body.Status == "" {
		errs = append(errs, &huma.ErrorDetail{Location: "body.status", Message: "status is required unless clear is true"})
	}
	if len(in.Body.IDs) == 0 && len(in.Body.Slugs) == 0 {
		errs = append(errs, &huma.ErrorDetail{Location: "body.ids", Message: "send ids or slugs"})
	}
	return errs
}

// setTaskStatus serves PATCH /v2/tasks/status: set tasks' review status.
func (s *Server) setTaskStatus(ctx context.Context, in *statusInput) (*moveOutput, error) {
	b := in.Body
	inputs := append(uuidStrings(b.IDs), b.Slugs...)
	res, err := s.catalog.SetTaskStatus(ctx, callerFrom(ctx), inputs, b.TasksetID, b.Status, b.Clear)
	if err != nil {
		return nil, storeError(err, "task")
	}
	return &moveOutput{Body: moveResult(res)}, nil
}

type stageInput struct {
	Body struct {
		IDs   []uuid.UUID `json:"ids" minItems:"1" maxItems:"10000"`
		Stage string      `json:"stage" minLength:"1" maxLength:"100" doc:"The next stage (advance) or an earlier one (send back)"`
	}
}

// moveTaskStage serves PATCH /v2/tasks/stage: move tasks between stages.
func (s *Server) moveTaskStage(ctx context.Context, in *stageInput) (*moveOutput, error) {
	res, err := s.catalog.MoveTaskStage(ctx, callerFrom(ctx), uuidStrings(in.Body.IDs), in.Body.Stage)
	if err != nil {
		return nil, storeError(err, "task")
	}
	return &moveOutput{Body: moveResult(res)}, nil
}

func uuidStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
