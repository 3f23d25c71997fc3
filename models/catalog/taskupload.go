package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// TaskUpload is one task of an upload.
type TaskUpload struct {
	models.TaskContent
	// TaskID, ExternalID and the name identify an existing task, in that order of precedence.
	TaskID     string
	ExternalID string
	ScenarioID *uuid.UUID
}

// Upload creates or updates tasks in a taskset.
type Upload struct {
	TasksetID   *uuid.UUID
	TasksetName string
	Description string
	// Purpose, when set, is the taskset's purpose from now on (EVAL or TRAINING).
	Purpose string
	// RegistryID is the environment of tasks that name none.
	RegistryID *uuid.UUID
	Tasks      []TaskUpload
}

// UploadResult says what an upload did.
type UploadResult struct {
	TasksetID      uuid.UUID
	TasksetName    string
	TaskCount      int
	TaskVersionIDs []uuid.UUID
	TasksCreated   int
	TasksUpdated   int
	TasksetCreated bool
}

// analyzeAfter is the number of new tasks after which an upload refreshes Postgres statistics.
const analyzeAfter = 1000

// UploadTasks creates the taskset if needed and creates or updates each task, in one transaction:
// a task whose content changed gets a new immutable version; unchanged content keeps its version.
func (s *Store) UploadTasks(ctx context.Context, c *models.Caller, up Upload) (*UploadResult, error) {
	tasks, err := s.resolveUpload(ctx, c, up)
	if err != nil {
		return nil, err
	}
	res := &UploadResult{TaskCount: len(tasks), TaskVersionIDs: make([]uuid.UUID, len(tasks))}
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		ts, created, err := s.uploadTaskset(ctx, tx, c, up)
		if err != nil {
			return err
		}
		res.TasksetID, res.TasksetName, res.TasksetCreated = ts.ID, ts.Name, created
		existing, err := loadTaskIndex(ctx, tx, ts.ID)
		if err != nil {
			return err
		}
		var w taskWrites
		for i, t := range tasks {
			versionID, outcome, err := existing.upsert(c, ts.ID, i, t, &w)
			if err != nil {
				return err
			}
			res.TaskVersionIDs[i] = versionID
			switch outcome {
			case "created":
				res.TasksCreated++
			case "updated":
				res.TasksUpdated++
			}
		}
		if err := w.flush(ctx, tx); err != nil {
			return err
		}
		_, err = tx.NewUpdate().Model((*models.Taskset)(nil)).Set("updated_at = ?", models.Now()).Where("id = ?", ts.ID).Exec(ctx)
		return err
	})
	if err == nil && s.Dialect == models.Postgres && res.TasksCreated >= analyzeAfter {
		// A bulk load leaves the planner with stale statistics until autovacuum runs, and it then
		// sorts whole tasksets instead of walking the name index.
		if _, err := s.DB.ExecContext(ctx, "ANALYZE tasks, task_versions"); err != nil {
			return nil, fmt.Errorf("upload tasks: analyze: %w", err)
		}
	}
	if err != nil {
		var verr models.ValidationError
		if errors.As(err, &verr) || errors.Is(err, models.ErrNotFound) || errors.Is(err, models.ErrForbidden) || errors.Is(err, models.ErrConflict) {
			return nil, err
		}
		if models.IsUniqueViolation(err) {
			return nil, fmt.Errorf("upload tasks: two tasks of the taskset would share a name or external_id: %w", models.ErrConflict)
		}
		return nil, fmt.Errorf("upload tasks: %w", err)
	}
	return res, nil
}

// uploadTaskset finds the upload's taskset (by id, or by name within the team) or creates it.
func (s *Store) uploadTaskset(ctx context.Context, tx bun.Tx, c *models.Caller, up Upload) (*models.Taskset, bool, error) {
	var ts models.Taskset
	if up.TasksetID != nil {
		row, err := s.GetTaskset(ctx, c, *up.TasksetID)
		if err != nil {
			return nil, false, err
		}
		if !row.CanEdit {
			return nil, false, fmt.Errorf("upload to taskset %s: read-only for the caller's team: %w", row.ID, models.ErrForbidden)
		}
		if err := setPurpose(ctx, tx, &row.Taskset, up.Purpose); err != nil {
			return nil, false, err
		}
		return &row.Taskset, false, nil
	}
	err := tx.NewSelect().Model(&ts).Where("team_id = ? AND name = ?", c.TeamID, up.TasksetName).Scan(ctx)
	if err == nil {
		if up.Description != "" && up.Description != ts.Description {
			ts.Description = up.Description
			if _, err := tx.NewUpdate().Model(&ts).Column("description").WherePK().Exec(ctx); err != nil {
				return nil, false, err
			}
		}
		if err := setPurpose(ctx, tx, &ts, up.Purpose); err != nil {
			return nil, false, err
		}
		return &ts, false, nil
	}
	if !models.IsNoRows(err) {
		return nil, false, err
	}
	ts = models.Taskset{
		ID: uuid.New(), TeamID: c.TeamID, Name: up.TasksetName, Description: up.Description,
		Columns: map[string]any{}, HiddenProgressStages: []string{}, Stages: []string{}, CreatedBy: &c.UserID,
		Purpose: PurposeEval, CreatedAt: models.Now(), UpdatedAt: models.Now(),
	}
	if up.Purpose != "" {
		ts.Purpose = up.Purpose
	}
	if _, err := tx.NewInsert().Model(&ts).Exec(ctx); err != nil {
		if models.IsUniqueViolation(err) {
			return nil, false, fmt.Errorf("create taskset %q: %w", up.TasksetName, models.ErrConflict)
		}
		return nil, false, err
	}
	return &ts, true, nil
}

// setPurpose changes a taskset's purpose when an upload names another.
func setPurpose(ctx context.Context, tx bun.Tx, ts *models.Taskset, purpose string) error {
	if purpose == "" || purpose == ts.Purpose {
		return nil
	}
	ts.Purpose = purpose
	_, err := tx.NewUpdate().Model(ts).Column("purpose").WherePK().Exec(ctx)
	return err
}

// taskIndex is every task of a taskset with its latest content hash, loaded once per upload so
// that matching costs no query per task.
type taskIndex struct {
	byID, byExternal, byName map[string]*indexedTask
}

type indexedTask struct {
	models.Task `bun:",extend"`
	Hash        string `bun:"hash,scanonly"`
}

func loadTaskIndex(ctx context.Context, tx bun.Tx, tasksetID uuid.UUID) (*taskIndex, error) {
	var rows []indexedTask
	if err := tx.NewSelect().Model(&rows).ColumnExpr("tk.*").ColumnExpr("tv.content_hash AS hash").
		Join("LEFT JOIN task_versions AS tv ON tv.id = tk.latest_version_id").
		Where("tk.taskset_id = ?", tasksetID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	idx := &taskIndex{byID: map[string]*indexedTask{}, byExternal: map[string]*indexedTask{}, byName: map[string]*indexedTask{}}
	for i := range rows {
		idx.add(&rows[i])
	}
	return idx, nil
}

func (x *taskIndex) add(t *indexedTask) {
	x.byID[t.ID.String()] = t
	x.byName[t.Name] = t
	if t.ExternalID != nil {
		x.byExternal[*t.ExternalID] = t
	}
}

// taskWrites collects an upload's writes so that they go out in batches.
type taskWrites struct {
	newTasks []models.Task
	updated  []models.Task
	versions []models.TaskVersion
}

func (w *taskWrites) flush(ctx context.Context, tx bun.Tx) error {
	if err := models.InsertInBatches(ctx, tx, w.newTasks, ""); err != nil {
		return err
	}
	for i := range w.updated {
		if _, err := tx.NewUpdate().Model(&w.updated[i]).Column("name", "external_id", "latest_version_id", "version_count", "updated_at").WherePK().Exec(ctx); err != nil {
			return err
		}
	}
	return models.InsertInBatches(ctx, tx, w.versions, "")
}

// upsert matches a task by task_id, external_id, then name, and queues a new version when its
// content changed. It returns the id of the version that holds the content after the upload.
func (x *taskIndex) upsert(c *models.Caller, tasksetID uuid.UUID, i int, t resolvedTask, w *taskWrites) (uuid.UUID, string, error) {
	var found *indexedTask
	if t.TaskID != "" {
		if found = x.byID[t.TaskID]; found == nil {
			return uuid.Nil, "", models.ValidationError{{Location: fmt.Sprintf("tasks[%d].task_id", i), Message: "no task with this id in the taskset", Value: t.TaskID}}
		}
	}
	if found == nil && t.ExternalID != "" {
		found = x.byExternal[t.ExternalID]
	}
	if found == nil {
		found = x.byName[t.Name]
	}
	var externalID *string
	if t.ExternalID != "" {
		externalID = &t.ExternalID
	}
	if found != nil && found.LatestVersionID != nil && found.Hash == t.hash && found.Name == t.Name && ptrEq(found.ExternalID, externalID) {
		return *found.LatestVersionID, "unchanged", nil
	}
	outcome := "updated"
	if found == nil {
		outcome = "created"
		found = &indexedTask{Task: models.Task{ID: uuid.New(), TeamID: c.TeamID, TasksetID: tasksetID, Status: TaskPending, CreatedAt: models.Now()}}
	}
	v := models.TaskVersion{
		ID: uuid.New(), TaskID: found.ID, TasksetID: tasksetID, TeamID: found.TeamID, Version: found.VersionCount + 1,
		ContentHash: t.hash, CreatedBy: &c.UserID, CreatedAt: models.Now(), RegistryID: t.registryID, ScenarioID: t.ScenarioID,
		TaskContent: t.TaskContent,
	}
	delete(x.byName, found.Name)
	found.Name, found.ExternalID, found.LatestVersionID, found.VersionCount, found.UpdatedAt, found.Hash = t.Name, externalID, &v.ID, v.Version, models.Now(), t.hash
	x.add(found)
	if outcome == "created" {
		w.newTasks = append(w.newTasks, found.Task)
	} else {
		w.updated = append(w.updated, found.Task)
	}
	w.versions = append(w.versions, v)
	return v.ID, outcome, nil
}

func ptrEq(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
