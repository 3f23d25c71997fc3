package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// ExportedTask is a task's latest version in the portable shape that upload accepts.
type ExportedTask struct {
	TaskID     uuid.UUID
	ExternalID string
	VersionID  uuid.UUID
	models.TaskContent
}

// ExportTaskset returns the latest version of every task of a taskset the caller may see, by name.
func (s *Store) ExportTaskset(ctx context.Context, c *models.Caller, ts *TasksetRow) ([]ExportedTask, error) {
	var rows []struct {
		models.TaskVersion `bun:",extend"`
		ExternalID         *string `bun:"external_id,scanonly"`
		RegName            *string `bun:"reg_name,scanonly"`
	}
	err := s.DB.NewSelect().Model(&rows).
		ColumnExpr("tv.*").ColumnExpr("tk.external_id AS external_id").ColumnExpr("r.name AS reg_name").
		Join("JOIN tasks AS tk ON tk.latest_version_id = tv.id").
		Join("LEFT JOIN registries AS r ON r.id = tv.registry_id").
		Where("tk.taskset_id = ?", ts.ID).
		OrderExpr("tk.name ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("export taskset: %w", err)
	}
	out := make([]ExportedTask, len(rows))
	for i, r := range rows {
		out[i] = exported(r.TaskVersion, r.ExternalID, r.RegName)
	}
	return out, nil
}

// exported is a version in the portable shape: the task's external id, and its environment
// named by the registry it was resolved to (when it was).
func exported(v models.TaskVersion, externalID, registryName *string) ExportedTask {
	e := ExportedTask{TaskID: v.TaskID, VersionID: v.ID, TaskContent: v.TaskContent}
	if externalID != nil {
		e.ExternalID = *externalID
	}
	if registryName != nil {
		e.Env = *registryName
	}
	return e
}

// GetTaskVersion reads one task version the caller's team owns or can see through its taskset.
func (s *Store) GetTaskVersion(ctx context.Context, c *models.Caller, id uuid.UUID) (*models.TaskVersion, error) {
	v := new(models.TaskVersion)
	if err := s.DB.NewSelect().Model(v).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "get task version")
	}
	if _, err := s.GetTaskset(ctx, c, v.TasksetID); err != nil {
		return nil, fmt.Errorf("get task version: %w", models.ErrNotFound)
	}
	return v, nil
}

// VisibleTaskVersions says which of ids are task versions the caller may see (those of tasksets it
// may read), as GetTaskVersion would one by one, in a query per 5,000 ids and one per distinct
// taskset: a launch of 100,000 explicit versions costs tens of queries, not 200,000.
func (s *Store) VisibleTaskVersions(ctx context.Context, c *models.Caller, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	visible := make(map[uuid.UUID]bool, len(ids))
	seen := map[uuid.UUID]bool{}
	for start := 0; start < len(ids); start += models.IDChunk {
		chunk := ids[start:min(start+models.IDChunk, len(ids))]
		var rows []struct {
			ID        uuid.UUID `bun:"id"`
			TasksetID uuid.UUID `bun:"taskset_id"`
		}
		if err := s.DB.NewSelect().Table("task_versions").Column("id", "taskset_id").Where("id IN (?)", bun.In(chunk)).Scan(ctx, &rows); err != nil {
			return nil, fmt.Errorf("visible task versions: %w", err)
		}
		for _, r := range rows {
			ok, known := seen[r.TasksetID]
			if !known {
				_, err := s.GetTaskset(ctx, c, r.TasksetID)
				if err != nil && !errors.Is(err, models.ErrNotFound) {
					return nil, err
				}
				ok = err == nil
				seen[r.TasksetID] = ok
			}
			if ok {
				visible[r.ID] = true
			}
		}
	}
	return visible, nil
}

// TaskVersions is a task with every version of it, newest first.
type TaskVersions struct {
	Task     models.Task
	Versions []TaskVersionEntry
}

// TaskVersionEntry is one version: its content in the portable shape, its number, and who made
// it when.
type TaskVersionEntry struct {
	ExportedTask
	Version   int
	CreatedBy *uuid.UUID
	CreatedAt time.Time
}

// ListTaskVersions reads a task the caller may see (through its taskset) with all its versions,
// newest first, each in the portable shape (env named by its environment).
func (s *Store) ListTaskVersions(ctx context.Context, c *models.Caller, taskID uuid.UUID) (*TaskVersions, error) {
	out := &TaskVersions{}
	if err := s.DB.NewSelect().Model(&out.Task).Where("id = ?", taskID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "list task versions")
	}
	if _, err := s.GetTaskset(ctx, c, out.Task.TasksetID); err != nil {
		return nil, fmt.Errorf("list task versions: %w", models.ErrNotFound)
	}
	var rows []struct {
		models.TaskVersion `bun:",extend"`
		RegName            *string `bun:"reg_name,scanonly"`
	}
	err := s.DB.NewSelect().Model(&rows).ColumnExpr("tv.*").ColumnExpr("r.name AS reg_name").
		Join("LEFT JOIN registries AS r ON r.id = tv.registry_id").
		Where("tv.task_id = ?", taskID).OrderExpr("tv.version DESC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list task versions: %w", err)
	}
	for _, r := range rows {
		out.Versions = append(out.Versions, TaskVersionEntry{ExportedTask: exported(r.TaskVersion, out.Task.ExternalID, r.RegName),
			Version: r.Version, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt})
	}
	return out, nil
}
