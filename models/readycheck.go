package models

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Requirements are a taskset's submission requirements: what a task's graded traces must show
// before it is ready for review. The spec has no route that sets them; operators set them with
// `proctor admin taskset requirements`.
type Requirements struct {
	// MinTraces is k: the graded (completed, valid) traces of the task's latest version needed.
	MinTraces int `json:"min_traces"`
	// MinAccuracy and MaxAccuracy bound the mean reward of those traces: a task nobody solves is
	// broken, one everybody solves is too easy.
	MinAccuracy *float64 `json:"min_accuracy,omitempty"`
	MaxAccuracy *float64 `json:"max_accuracy,omitempty"`
	// Models must each have at least one graded trace (model_name values).
	Models []string `json:"models,omitempty"`
}

// SetTasksetRequirements replaces a taskset's requirements (nil clears them) and bumps their version.
func (s *Store) SetTasksetRequirements(ctx context.Context, tasksetID uuid.UUID, r *Requirements) error {
	var value any
	if r != nil {
		b, _ := json.Marshal(r)
		var m map[string]any
		json.Unmarshal(b, &m) //nolint:errcheck // our own marshalled struct
		value = m
	}
	res, err := s.DB.NewUpdate().Model((*Taskset)(nil)).Set("requirements = ?", value).
		Set("requirements_version = requirements_version + 1").Set("updated_at = ?", now()).Where("id = ?", tasksetID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("set requirements: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("set requirements: taskset %s: %w", tasksetID, ErrNotFound)
	}
	return nil
}

// ReadyCheck is the evaluation of a task against its taskset's requirements. It is informational:
// it never blocks a status move.
type ReadyCheck struct {
	HasRequirements     bool
	Passed              bool
	K                   int
	CandidateCount      int
	EvaluatedAt         time.Time
	CanOverride         bool
	Checks              []Check
	EvaluatedTraceIDs   []uuid.UUID
	RequirementsVersion int
}

// Check is one requirement and how the task fares against it.
type Check struct {
	Key, Label        string
	Passed            bool
	Required, Current string
	HowToFix          string
	OffendingTraceIDs []uuid.UUID
	Severity          string
}

// CheckTaskReady evaluates a task's latest version against its taskset's requirements, from the
// version's graded traces. Without requirements it returns the not-configured result
// (HasRequirements false, no checks).
func (s *Store) CheckTaskReady(ctx context.Context, c *Caller, taskID uuid.UUID) (*ReadyCheck, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	rc := &ReadyCheck{EvaluatedAt: now(), CanOverride: t.Taskset.CanEdit, RequirementsVersion: t.Taskset.RequirementsVersion,
		Checks: []Check{}, EvaluatedTraceIDs: []uuid.UUID{}, Passed: true}
	if t.Taskset.Requirements == nil || t.Task.LatestVersionID == nil {
		return rc, nil
	}
	var req Requirements
	b, _ := json.Marshal(t.Taskset.Requirements)
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("ready check: requirements: %w", err)
	}
	rc.HasRequirements, rc.K = true, req.MinTraces

	var traces []struct {
		ID        uuid.UUID `bun:"id"`
		Status    string    `bun:"status"`
		Reward    *float64  `bun:"reward"`
		ModelName *string   `bun:"model_name"`
	}
	if err := s.DB.NewSelect().Model((*Trace)(nil)).ColumnExpr("tr.id, tr.status, tr.reward, m.model_name").
		Join("LEFT JOIN llm_models AS m ON m.id = tr.model_id").
		Where("tr.task_version_id = ? AND tr.is_valid", *t.Task.LatestVersionID).
		OrderExpr("tr.created_at ASC, tr.id ASC").Scan(ctx, &traces); err != nil {
		return nil, fmt.Errorf("ready check: traces: %w", err)
	}
	var sum float64
	var errored, unsolved, solved []uuid.UUID
	byModel := map[string]int{}
	for _, tr := range traces {
		switch {
		case tr.Status == TraceCompleted && tr.Reward != nil:
			rc.EvaluatedTraceIDs = append(rc.EvaluatedTraceIDs, tr.ID)
			sum += *tr.Reward
			if *tr.Reward >= 1 {
				solved = append(solved, tr.ID)
			} else {
				unsolved = append(unsolved, tr.ID)
			}
			if tr.ModelName != nil {
				byModel[*tr.ModelName]++
			}
		case tr.Status == TraceError:
			errored = append(errored, tr.ID)
		}
	}
	n := len(rc.EvaluatedTraceIDs)
	rc.CandidateCount = n
	run := fmt.Sprintf("run more attempts of the task's latest version, e.g. `proctor eval %s --model <model> --group-size %d`", t.Taskset.Name, max(req.MinTraces-n, 1))
	add := func(c Check) {
		if c.OffendingTraceIDs == nil {
			c.OffendingTraceIDs = []uuid.UUID{}
		}
		if c.Severity == "" {
			c.Severity = "error"
		}
		if !c.Passed && c.Severity == "error" {
			rc.Passed = false
		}
		rc.Checks = append(rc.Checks, c)
	}
	add(Check{Key: "graded_traces", Label: "Enough graded traces", Passed: n >= req.MinTraces,
		Required: fmt.Sprintf(">= %d", req.MinTraces), Current: fmt.Sprint(n), HowToFix: run})
	mean := 0.0
	if n > 0 {
		mean = sum / float64(n)
	}
	if req.MinAccuracy != nil {
		add(Check{Key: "min_accuracy", Label: "Solvable: mean reward high enough", Passed: n > 0 && mean >= *req.MinAccuracy,
			Required: fmt.Sprintf(">= %.2f", *req.MinAccuracy), Current: fmt.Sprintf("%.2f", mean), OffendingTraceIDs: unsolved,
			HowToFix: "check the failing traces: fix the task's prompt, setup or evaluation so that a correct solution earns reward 1.0"})
	}
	if req.MaxAccuracy != nil {
		add(Check{Key: "max_accuracy", Label: "Not too easy: mean reward low enough", Passed: n > 0 && mean <= *req.MaxAccuracy,
			Required: fmt.Sprintf("<= %.2f", *req.MaxAccuracy), Current: fmt.Sprintf("%.2f", mean), OffendingTraceIDs: solved,
			HowToFix: "make the task harder: the listed traces solved it"})
	}
	if len(req.Models) > 0 {
		var missing []string
		for _, m := range req.Models {
			if byModel[m] == 0 {
				missing = append(missing, m)
			}
		}
		slices.Sort(missing)
		add(Check{Key: "models", Label: "Graded by every required model", Passed: len(missing) == 0,
			Required: strings.Join(req.Models, ", "), Current: fmt.Sprintf("missing: %s", strings.Join(missing, ", ")),
			HowToFix: "run the task with each missing model"})
	}
	add(Check{Key: "errors", Label: "No attempts ended in error", Passed: len(errored) == 0, Severity: "warning",
		Required: "0", Current: fmt.Sprint(len(errored)), OffendingTraceIDs: errored,
		HowToFix: "read the error traces' logs: an environment or setup failure usually shows there"})
	return rc, nil
}
