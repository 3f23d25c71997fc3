package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
)

// ReadyCheckItem is one requirement and how the task fares against it.
type ReadyCheckItem struct {
	Key               string      `json:"key" enum:"graded_traces,min_accuracy,max_accuracy,models,errors,qa_reference_solves,qa_stage_passed"`
	Label             string      `json:"label"`
	Passed            bool        `json:"passed"`
	Required          string      `json:"required"`
	Current           string      `json:"current"`
	HowToFix          string      `json:"how_to_fix"`
	OffendingTraceIDs []uuid.UUID `json:"offending_trace_ids" nullable:"false"`
	Severity          string      `json:"severity" enum:"error,warning"`
}

// ReadyCheck is a task against its taskset's submission requirements (spec: Ready-check result).
// Without requirements the result is the not-configured one: has_requirements false, passed true,
// no checks.
type ReadyCheck struct {
	Passed              bool             `json:"passed" doc:"Every check of severity error passed"`
	K                   int              `json:"k" doc:"Graded traces required"`
	CandidateCount      int              `json:"candidate_count" doc:"Graded, valid traces of the task's latest version"`
	EvaluatedAt         time.Time        `json:"evaluated_at"`
	CanOverride         bool             `json:"can_override" doc:"The caller may set the status regardless (the check never blocks)"`
	Checks              []ReadyCheckItem `json:"checks" nullable:"false"`
	EvaluatedTraceIDs   []uuid.UUID      `json:"evaluated_trace_ids" nullable:"false"`
	HasRequirements     bool             `json:"has_requirements"`
	RequirementsVersion int              `json:"requirements_version"`
}

type readyCheckOutput struct{ Body ReadyCheck }

func (s *Server) registerReadyCheck() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-task-ready-check", Method: http.MethodGet, Path: "/tasks/{task_id}/ready-check", Tags: []string{"Tasks"},
		Summary: "Check a task against its taskset's requirements",
		Description: "Evaluates the taskset's submission requirements (graded traces, accuracy bounds, required models, QA checks) against the graded " +
			"traces of the task's latest version. Informational only. Without requirements: the not-configured result (has_requirements false). " +
			"QA checks are checks of the task itself, each a check of its own when the taskset requires it: qa_reference_solves, the reference " +
			"solution (the latest version's validation calls, replayed by the oracle model) earns reward 1 in every graded oracle attempt, with at " +
			"least one and none ended in error; qa_stage_passed, the task has been through a given stage of the taskset's review stages (it has " +
			"advanced past it, or left pending). Operators set requirements with `proctor admin taskset requirements`.",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getTaskReadyCheck)
}

// getTaskReadyCheck serves GET /v2/tasks/{task_id}/ready-check: check a task against its taskset's requirements.
func (s *Server) getTaskReadyCheck(ctx context.Context, in *taskPath) (*readyCheckOutput, error) {
	rc, err := s.catalog.CheckTaskReady(ctx, callerFrom(ctx), in.TaskID)
	if err != nil {
		return nil, storeError(err, "task")
	}
	out := ReadyCheck{Passed: rc.Passed, K: rc.K, CandidateCount: rc.CandidateCount, EvaluatedAt: rc.EvaluatedAt, CanOverride: rc.CanOverride,
		Checks: []ReadyCheckItem{}, EvaluatedTraceIDs: rc.EvaluatedTraceIDs, HasRequirements: rc.HasRequirements, RequirementsVersion: rc.RequirementsVersion}
	for _, c := range rc.Checks {
		out.Checks = append(out.Checks, ReadyCheckItem{Key: c.Key, Label: c.Label, Passed: c.Passed, Required: c.Required, Current: c.Current,
			HowToFix: c.HowToFix, OffendingTraceIDs: c.OffendingTraceIDs, Severity: c.Severity})
	}
	return &readyCheckOutput{Body: out}, nil
}
