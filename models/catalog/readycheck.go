package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
)

// SetTasksetRequirements replaces a taskset's requirements (nil clears them) and bumps their
// version. Requirements that no task could meet, or that name a stage the taskset does not
// define, are a ValidationError (locations are the requirement's own fields).
func (s *Store) SetTasksetRequirements(ctx context.Context, tasksetID uuid.UUID, r *models.Requirements) error {
	var ts models.Taskset
	if err := s.DB.NewSelect().Model(&ts).Column("stages").Where("id = ?", tasksetID).Scan(ctx); err != nil {
		return fmt.Errorf("set requirements: taskset %s: %w", tasksetID, models.NotFound(err, "taskset"))
	}
	var value any
	if r != nil {
		if errs := r.Check(ts.Stages); len(errs) > 0 {
			return fmt.Errorf("set requirements: %w", errs)
		}
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("set requirements: %w", err)
		}
		value = string(b)
	}
	if _, err := s.DB.NewUpdate().Model((*models.Taskset)(nil)).Set("requirements = ?", value).
		Set("requirements_version = requirements_version + 1").Set("updated_at = ?", models.Now()).Where("id = ?", tasksetID).Exec(ctx); err != nil {
		return fmt.Errorf("set requirements: %w", err)
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
func (s *Store) CheckTaskReady(ctx context.Context, c *models.Caller, taskID uuid.UUID) (*ReadyCheck, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	rc := &ReadyCheck{EvaluatedAt: models.Now(), CanOverride: t.Taskset.CanEdit, RequirementsVersion: t.Taskset.RequirementsVersion,
		Checks: []Check{}, EvaluatedTraceIDs: []uuid.UUID{}, Passed: true}
	if t.Taskset.Requirements == nil || t.Task.LatestVersionID == nil {
		return rc, nil
	}
	req := *t.Taskset.Requirements
	rc.HasRequirements, rc.K = true, req.MinTraces

	traces, err := s.readyTraces(ctx, *t.Task.LatestVersionID)
	if err != nil {
		return nil, err
	}
	o := outcomesOf(traces)
	rc.EvaluatedTraceIDs = append(rc.EvaluatedTraceIDs, o.graded...)
	rc.CandidateCount = len(o.graded)
	rc.add(gradedTraces(t.Taskset.Name, req.MinTraces, o))
	if req.MinAccuracy != nil {
		rc.add(minAccuracy(*req.MinAccuracy, o))
	}
	if req.MaxAccuracy != nil {
		rc.add(maxAccuracy(*req.MaxAccuracy, o))
	}
	if len(req.Models) > 0 {
		rc.add(requiredModels(req.Models, o))
	}
	rc.add(noErrors(o))
	for _, q := range req.QAChecks {
		c, err := s.qaCheck(ctx, t, q, traces)
		if err != nil {
			return nil, err
		}
		rc.add(c)
	}
	return rc, nil
}

// add records a check's result: a failed check of severity error (the default) fails the task.
func (rc *ReadyCheck) add(c Check) {
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

// readyTraces reads the valid traces of a version, in launch order.
func (s *Store) readyTraces(ctx context.Context, versionID uuid.UUID) ([]readyTrace, error) {
	var traces []readyTrace
	if err := s.DB.NewSelect().Model((*models.Trace)(nil)).ColumnExpr("tr.id, tr.status, tr.reward, m.model_name, m.adapter").
		Join("LEFT JOIN llm_models AS m ON m.id = tr.model_id").
		Where("tr.task_version_id = ? AND tr.is_valid", versionID).
		OrderExpr("tr.created_at ASC, tr.id ASC").Scan(ctx, &traces); err != nil {
		return nil, fmt.Errorf("ready check: traces: %w", err)
	}
	return traces, nil
}

// traceOutcomes sorts a version's valid traces by how they ended, for the checks that count them.
type traceOutcomes struct {
	// graded are the completed traces with a reward, solved (reward 1 or more) or unsolved.
	graded, solved, unsolved []uuid.UUID
	errored                  []uuid.UUID
	// sum is the graded traces' total reward; byModel counts them per model name.
	sum     float64
	byModel map[string]int
}

// outcomesOf sorts traces by how they ended.
func outcomesOf(traces []readyTrace) traceOutcomes {
	o := traceOutcomes{byModel: map[string]int{}}
	for _, tr := range traces {
		switch {
		case tr.Status == models.TraceCompleted && tr.Reward != nil:
			o.graded = append(o.graded, tr.ID)
			o.sum += *tr.Reward
			if *tr.Reward >= 1 {
				o.solved = append(o.solved, tr.ID)
			} else {
				o.unsolved = append(o.unsolved, tr.ID)
			}
			if tr.ModelName != nil {
				o.byModel[*tr.ModelName]++
			}
		case tr.Status == models.TraceError:
			o.errored = append(o.errored, tr.ID)
		}
	}
	return o
}

// mean is the graded traces' mean reward; 0 without any.
func (o traceOutcomes) mean() float64 {
	if len(o.graded) == 0 {
		return 0
	}
	return o.sum / float64(len(o.graded))
}

// gradedTraces is the check of Requirements.MinTraces for a task of taskset.
func gradedTraces(taskset string, minTraces int, o traceOutcomes) Check {
	n := len(o.graded)
	run := fmt.Sprintf("run more attempts of the task's latest version, e.g. `proctor eval %s --model <model> --group-size %d`", taskset, max(minTraces-n, 1))
	return Check{Key: "graded_traces", Label: "Enough graded traces", Passed: n >= minTraces,
		Required: fmt.Sprintf(">= %d", minTraces), Current: fmt.Sprint(n), HowToFix: run}
}

// minAccuracy is the check of Requirements.MinAccuracy: the task is solvable.
func minAccuracy(bound float64, o traceOutcomes) Check {
	mean := o.mean()
	return Check{Key: "min_accuracy", Label: "Solvable: mean reward high enough", Passed: len(o.graded) > 0 && mean >= bound,
		Required: fmt.Sprintf(">= %.2f", bound), Current: fmt.Sprintf("%.2f", mean), OffendingTraceIDs: o.unsolved,
		HowToFix: "check the failing traces: fix the task's prompt, setup or evaluation so that a correct solution earns reward 1.0"}
}

// maxAccuracy is the check of Requirements.MaxAccuracy: the task is not too easy.
func maxAccuracy(bound float64, o traceOutcomes) Check {
	mean := o.mean()
	return Check{Key: "max_accuracy", Label: "Not too easy: mean reward low enough", Passed: len(o.graded) > 0 && mean <= bound,
		Required: fmt.Sprintf("<= %.2f", bound), Current: fmt.Sprintf("%.2f", mean), OffendingTraceIDs: o.solved,
		HowToFix: "make the task harder: the listed traces solved it"}
}

// requiredModels is the check of Requirements.Models: each model graded the task at least once.
func requiredModels(models []string, o traceOutcomes) Check {
	var missing []string
	for _, m := range models {
		if o.byModel[m] == 0 {
			missing = append(missing, m)
		}
	}
	slices.Sort(missing)
	return Check{Key: "models", Label: "Graded by every required model", Passed: len(missing) == 0,
		Required: strings.Join(models, ", "), Current: fmt.Sprintf("missing: %s", strings.Join(missing, ", ")),
		HowToFix: "run the task with each missing model"}
}

// noErrors is the check every requirement set has: no attempt ended in error (a warning only).
func noErrors(o traceOutcomes) Check {
	return Check{Key: "errors", Label: "No attempts ended in error", Passed: len(o.errored) == 0, Severity: "warning",
		Required: "0", Current: fmt.Sprint(len(o.errored)), OffendingTraceIDs: o.errored,
		HowToFix: "read the error traces' logs: an environment or setup failure usually shows there"}
}

// readyTrace is a trace of a task's latest version as the ready check reads it.
type readyTrace struct {
	ID        uuid.UUID `bun:"id"`
	Status    string    `bun:"status"`
	Reward    *float64  `bun:"reward"`
	ModelName *string   `bun:"model_name"`
	Adapter   *string   `bun:"adapter"`
}

// qaCheck evaluates one QA check of task t, whose latest version's valid traces are traces.
func (s *Store) qaCheck(ctx context.Context, t *TaskInTaskset, q models.QACheck, traces []readyTrace) (Check, error) {
	switch q.Kind {
	case models.QAReferenceSolves:
		var v models.TaskVersion
		if err := s.DB.NewSelect().Model(&v).Column("validation").Where("id = ?", *t.Task.LatestVersionID).Scan(ctx); err != nil {
			return Check{}, fmt.Errorf("ready check: version: %w", err)
		}
		return referenceSolves(t.Taskset.Name, len(v.Validation), traces), nil
	case models.QAStagePassed:
		return stagePassed(t.Task, t.Taskset.Stages, q.Stage), nil
	}
	// SetTasksetRequirements stores no other kind.
	return Check{}, fmt.Errorf("ready check: unknown QA check %q", q.Kind)
}

// referenceSolves is the QAReferenceSolves check of a version with calls validation calls.
func referenceSolves(taskset string, calls int, traces []readyTrace) Check {
	c := Check{Key: "qa_" + models.QAReferenceSolves, Label: "QA: the reference solution earns full reward",
		Required: "reward 1.00 in every graded oracle attempt, none ended in error"}
	var graded, solved int
	for _, tr := range traces {
		if tr.Adapter == nil || *tr.Adapter != models.AdapterOracle {
			continue
		}
		switch {
		case tr.Status == models.TraceCompleted && tr.Reward != nil:
			graded++
			if *tr.Reward >= 1 {
				solved++
			} else {
				c.OffendingTraceIDs = append(c.OffendingTraceIDs, tr.ID)
			}
		case tr.Status == models.TraceError:
			c.OffendingTraceIDs = append(c.OffendingTraceIDs, tr.ID)
		}
	}
	switch {
	case calls == 0:
		c.Current = "the task has no validation calls: it has no reference solution"
		c.HowToFix = "give the task validation calls (the tool calls that solve it, which the oracle model replays) and upload it again"
	case graded == 0 && len(c.OffendingTraceIDs) == 0:
		c.Current = "no graded oracle attempt"
		c.HowToFix = fmt.Sprintf("run the reference solution: `proctor eval %s --model oracle`", taskset)
	default:
		c.Passed = solved == graded && len(c.OffendingTraceIDs) == 0
		c.Current = fmt.Sprintf("%d of %d graded oracle attempts earned 1.00; %d ended in error", solved, graded, len(c.OffendingTraceIDs)-(graded-solved))
		c.HowToFix = "read the listed attempts: when the reference solution does not earn 1.00, the validation calls, the setup or the evaluation is wrong"
	}
	return c
}

// stagePassed is the QAStagePassed check of stage for task t of a taskset with stages.
func stagePassed(t models.Task, stages []string, stage string) Check {
	c := Check{Key: "qa_" + models.QAStagePassed, Label: fmt.Sprintf("QA: through the %q stage", stage), Required: "past " + stage}
	i := slices.Index(stages, stage)
	switch {
	case i < 0:
		c.Current = fmt.Sprintf("the taskset's stages (%s) no longer include %q", strings.Join(stages, ", "), stage)
		c.HowToFix = "set the taskset's requirements again with one of its stages"
	default:
		// A task is through a stage once it moved past it, or once it was marked done at the last
		// stage (ready needs the last stage; a reviewer may decide on a task at any stage, and a
		// decision is no sign of a stage's work done: the stage is kept across status changes).
		at := stageOf(t, stages)
		done := (t.Status == TaskReady || t.Status == TaskVerified) && at == len(stages)-1
		c.Passed = at > i || done
		c.Current = "at " + stages[at]
		if t.Status != TaskPending {
			c.Current = t.Status + ", " + c.Current
		}
		if done {
			c.Current = t.Status
		}
		if !c.Passed {
			c.HowToFix = fmt.Sprintf("finish the task's %s work, then advance it to the next stage (PATCH /v2/tasks/stage)", stage)
		}
	}
	return c
}
