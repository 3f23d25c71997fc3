package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// Task event kinds.
const (
	EventStatusChanged = "status_changed"
	EventStageChanged  = "stage_changed"
)

// TaskStatuses are the review statuses a task can be set to.
var TaskStatuses = []string{TaskPending, TaskReady, TaskVerified, TaskRevision, TaskRejected}

// MoveFailure reports why one id of a batch move did not move.
type MoveFailure struct {
	Input      string
	Reason     string
	Code       string
	ResolvedID *uuid.UUID
}

// MoveResult is the per-id outcome of a non-atomic batch move.
type MoveResult struct {
	Succeeded []uuid.UUID
	Unchanged []uuid.UUID
	Failures  []MoveFailure
}

func (r *MoveResult) fail(input, code, reason string, resolved *uuid.UUID) {
	r.Failures = append(r.Failures, MoveFailure{Input: input, Code: code, Reason: reason, ResolvedID: resolved})
}

// resolveForMove finds the task an input names: a task id, a task version id, or (with a taskset)
// a name or external id. It records a failure and returns nil when it cannot, or when the caller
// may not change the task. A failure echoes only the caller's input, and a slug is looked up only
// in a taskset the caller can see, so that nothing is learned about other teams' tasksets.
func (s *Store) resolveForMove(ctx context.Context, c *models.Caller, input string, tasksetID *uuid.UUID, res *MoveResult) *TaskInTaskset {
	if id, err := uuid.Parse(input); err == nil {
		return s.resolveIDForMove(ctx, c, input, id, res)
	}
	if tasksetID == nil {
		res.fail(input, "taskset_required", "a slug names a task only within taskset_id", nil)
		return nil
	}
	const missing = "no task of this name or external_id in the taskset"
	if _, err := s.GetTaskset(ctx, c, *tasksetID); err != nil {
		res.fail(input, "not_found", missing, nil)
		return nil
	}
	var t models.Task
	err := s.DB.NewSelect().Model(&t).Where("taskset_id = ?", *tasksetID).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("name = ?", input).WhereOr("external_id = ?", input)
		}).OrderExpr("CASE WHEN name = ? THEN 0 ELSE 1 END", input).Limit(1).Scan(ctx)
	if err != nil {
		res.fail(input, "not_found", missing, nil)
		return nil
	}
	return s.resolveIDForMove(ctx, c, input, t.ID, res)
}

// resolveIDForMove is resolveForMove for a task or task version id; failures name input.
func (s *Store) resolveIDForMove(ctx context.Context, c *models.Caller, input string, id uuid.UUID, res *MoveResult) *TaskInTaskset {
	t, err := s.GetTask(ctx, c, id)
	if err != nil {
		res.fail(input, "not_found", "no task or task version with this id is visible", nil)
		return nil
	}
	if !t.Taskset.CanEdit {
		res.fail(input, "forbidden", "the caller's team may not edit this taskset", &t.Task.ID)
		return nil
	}
	return t
}

// SetTaskStatus moves each task to status (or back to pending when clear). It is not atomic: each
// id succeeds, is unchanged or fails on its own. A taskset with stages requires its last stage
// before ready.
func (s *Store) SetTaskStatus(ctx context.Context, c *models.Caller, inputs []string, tasksetID *uuid.UUID, status string, clear bool) (*MoveResult, error) {
	if clear {
		status = TaskPending
	}
	if !slices.Contains(TaskStatuses, status) {
		return nil, models.ValidationError{{Location: "status", Message: "status must be one of " + strings.Join(TaskStatuses, ", "), Value: status}}
	}
	res := &MoveResult{}
	for _, input := range inputs {
		t := s.resolveForMove(ctx, c, input, tasksetID, res)
		if t == nil {
			continue
		}
		task := t.Task
		if task.Status == status && !(clear && task.Stage != nil) {
			res.Unchanged = append(res.Unchanged, task.ID)
			continue
		}
		if status == TaskReady && len(t.Taskset.Stages) > 0 && stageOf(task, t.Taskset.Stages) != len(t.Taskset.Stages)-1 {
			res.fail(input, "stage_incomplete", fmt.Sprintf("the taskset's stages require %q before ready", t.Taskset.Stages[len(t.Taskset.Stages)-1]), &task.ID)
			continue
		}
		err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			upd := tx.NewUpdate().Model((*models.Task)(nil)).Set("status = ?", status).Set("updated_at = ?", models.Now()).Where("id = ?", task.ID)
			if clear {
				upd = upd.Set("stage = NULL")
			}
			if _, err := upd.Exec(ctx); err != nil {
				return err
			}
			return insertEvent(ctx, tx, c, task, EventStatusChanged, task.Status, status)
		})
		if err != nil {
			return nil, fmt.Errorf("set task status: %w", err)
		}
		res.Succeeded = append(res.Succeeded, task.ID)
	}
	return res, nil
}

// MoveTaskStage advances each pending task one stage, or sends it back to an earlier one.
func (s *Store) MoveTaskStage(ctx context.Context, c *models.Caller, inputs []string, stage string) (*MoveResult, error) {
	res := &MoveResult{}
	for _, input := range inputs {
		t := s.resolveForMove(ctx, c, input, nil, res)
		if t == nil {
			continue
		}
		task, stages := t.Task, t.Taskset.Stages
		target := slices.Index(stages, stage)
		current := stageOf(task, stages)
		switch {
		case len(stages) == 0:
			res.fail(input, "no_stages", "the taskset defines no stages", &task.ID)
			continue
		case target < 0:
			res.fail(input, "unknown_stage", fmt.Sprintf("the taskset's stages are %s", strings.Join(stages, ", ")), &task.ID)
			continue
		case task.Status != TaskPending:
			res.fail(input, "not_pending", "only pending tasks move between stages; the task is "+task.Status, &task.ID)
			continue
		case target == current:
			res.Unchanged = append(res.Unchanged, task.ID)
			continue
		case target > current+1:
			res.fail(input, "stage_skip", fmt.Sprintf("a task advances one stage at a time: next is %q", stages[current+1]), &task.ID)
			continue
		}
		err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.NewUpdate().Model((*models.Task)(nil)).Set("stage = ?", stage).Set("updated_at = ?", models.Now()).Where("id = ?", task.ID).Exec(ctx); err != nil {
				return err
			}
			return insertEvent(ctx, tx, c, task, EventStageChanged, stages[current], stage)
		})
		if err != nil {
			return nil, fmt.Errorf("move task stage: %w", err)
		}
		res.Succeeded = append(res.Succeeded, task.ID)
	}
	return res, nil
}

// stageOf is the index of a task's stage; a task that has none is at the first stage.
func stageOf(t models.Task, stages []string) int {
	if t.Stage == nil {
		return 0
	}
	return max(slices.Index(stages, *t.Stage), 0)
}

func insertEvent(ctx context.Context, tx bun.Tx, c *models.Caller, t models.Task, kind, from, to string) error {
	ev := &models.TaskEvent{ID: uuid.New(), TaskID: t.ID, TeamID: t.TeamID, Kind: kind, FromValue: from, ToValue: to,
		Version: t.VersionCount, UserID: &c.UserID, CreatedAt: models.Now()}
	_, err := tx.NewInsert().Model(ev).Exec(ctx)
	return err
}

// SetTasksetStages sets the ordered review checklist of a taskset the caller may edit.
func (s *Store) SetTasksetStages(ctx context.Context, c *models.Caller, tasksetID uuid.UUID, stages []string) error {
	ts, err := s.GetTaskset(ctx, c, tasksetID)
	if err != nil {
		return err
	}
	if !ts.CanEdit {
		return fmt.Errorf("set stages: %w", models.ErrForbidden)
	}
	if stages == nil {
		stages = []string{}
	}
	_, err = s.DB.NewUpdate().Model((*models.Taskset)(nil)).Set("stages = ?", stages).Set("updated_at = ?", models.Now()).Where("id = ?", tasksetID).Exec(ctx)
	return err
}
