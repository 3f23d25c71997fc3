package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// Upload modes and statuses.
const (
	UploadSingle    = "single"    // one presigned PUT
	UploadMultipart = "multipart" // a presigned PUT per part, joined at complete

	UploadPending = "pending" // reserved; its bytes are being uploaded
	UploadStaged  = "staged"  // verified: its size (and checksum) matched
	UploadFailed  = "failed"  // verification failed; Error says why and its bytes are gone
)

// ParseLocator reads a storage://uploads/<taskset>/<upload>/<name> locator.
func ParseLocator(loc string) (tasksetID, uploadID uuid.UUID, ok bool) {
	rest, found := strings.CutPrefix(loc, "storage://uploads/")
	if !found {
		return uuid.Nil, uuid.Nil, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 {
		return uuid.Nil, uuid.Nil, false
	}
	ts, err1 := uuid.Parse(parts[0])
	id, err2 := uuid.Parse(parts[1])
	return ts, id, err1 == nil && err2 == nil
}

// editableTaskset checks the caller may change the taskset's content.
func (s *Store) editableTaskset(ctx context.Context, c *models.Caller, tasksetID uuid.UUID) error {
	ts, err := s.GetTaskset(ctx, c, tasksetID)
	if err != nil {
		return err
	}
	if !ts.CanEdit {
		return fmt.Errorf("taskset %s is read-only for the caller's team: %w", tasksetID, models.ErrForbidden)
	}
	return nil
}

// CreateUpload records a pending upload of the caller's to a taskset they may edit.
func (s *Store) CreateUpload(ctx context.Context, c *models.Caller, u *models.StagedFile) error {
	if err := s.editableTaskset(ctx, c, u.TasksetID); err != nil {
		return err
	}
	u.ID, u.TeamID, u.MembershipID, u.Status, u.CreatedAt = uuid.New(), c.TeamID, c.MembershipID, UploadPending, models.Now()
	u.ObjectKey = fmt.Sprintf("uploads/%s/%s/%s", c.TeamID, u.TasksetID, u.ID)
	if _, err := s.DB.NewInsert().Model(u).Exec(ctx); err != nil {
		return fmt.Errorf("create upload: %w", err)
	}
	return nil
}

// GetUpload reads an upload of a taskset the caller may edit.
func (s *Store) GetUpload(ctx context.Context, c *models.Caller, tasksetID, id uuid.UUID) (*models.StagedFile, error) {
	if err := s.editableTaskset(ctx, c, tasksetID); err != nil {
		return nil, err
	}
	u := new(models.StagedFile)
	if err := s.DB.NewSelect().Model(u).Where("id = ? AND taskset_id = ?", id, tasksetID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "upload")
	}
	return u, nil
}

// SettleUpload records the outcome of an upload's verification: staged, or failed with why.
func (s *Store) SettleUpload(ctx context.Context, u *models.StagedFile, contentType, failure string) error {
	q := s.DB.NewUpdate().Model((*models.StagedFile)(nil)).Where("id = ? AND status = ?", u.ID, UploadPending)
	if failure != "" {
		u.Status, u.Error = UploadFailed, failure
		q = q.Set("status = ?", UploadFailed).Set("error = ?", failure)
	} else {
		at := models.Now()
		u.Status, u.ContentType, u.StagedAt = UploadStaged, contentType, &at
		q = q.Set("status = ?", UploadStaged).Set("content_type = ?", contentType).Set("staged_at = ?", at)
	}
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("settle upload: %w", err)
	}
	return nil
}

// referencingTasks names the tasks of the taskset whose latest version mentions text anywhere in
// its content (prompt, system prompt, description, arguments, agent config, validation).
func (s *Store) referencingTasks(ctx context.Context, db bun.IDB, tasksetID uuid.UUID, text string) ([]string, error) {
	like := "%" + models.EscapeLike(text) + "%"
	var names []string
	err := db.NewSelect().TableExpr("tasks AS tk").Join("JOIN task_versions AS tv ON tv.id = tk.latest_version_id").ColumnExpr("tk.name").
		Where("tk.taskset_id = ?", tasksetID).
		WhereGroup(" AND ", func(w *bun.SelectQuery) *bun.SelectQuery {
			for _, col := range []string{"tv.prompt", "tv.system_prompt", "tv.description", "CAST(tv.args AS TEXT)", "CAST(tv.agent_config AS TEXT)",
				"CAST(tv.validation AS TEXT)"} {
				w = w.WhereOr(col+" LIKE ? ESCAPE '\\'", like)
			}
			return w
		}).OrderExpr("tk.name ASC").Limit(5).Scan(ctx, &names)
	if err != nil {
		return nil, fmt.Errorf("uploads in use: %w", err)
	}
	return names, nil
}

// DeleteUpload removes an upload of a taskset the caller may edit, unless a task of the taskset
// refers to it (ErrConflict names them). It returns the upload (nil when there was none), whose
// stored objects the caller removes.
func (s *Store) DeleteUpload(ctx context.Context, c *models.Caller, tasksetID, id uuid.UUID) (*models.StagedFile, error) {
	if err := s.editableTaskset(ctx, c, tasksetID); err != nil {
		return nil, err
	}
	var out *models.StagedFile
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		u := new(models.StagedFile)
		if err := tx.NewSelect().Model(u).Where("id = ? AND taskset_id = ?", id, tasksetID).Scan(ctx); err != nil {
			if models.IsNoRows(err) {
				return nil
			}
			return err
		}
		users, err := s.referencingTasks(ctx, tx, tasksetID, u.Locator())
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return fmt.Errorf("tasks refer to %s (%s): remove it from their content first: %w", u.Name, strings.Join(users, ", "), models.ErrConflict)
		}
		if _, err := tx.NewDelete().Model(u).WherePK().Exec(ctx); err != nil {
			return err
		}
		out = u
		return nil
	})
	return out, err
}

// BriefAttachments lists the uploads of a task's taskset that its latest version refers to, by
// name.
func (s *Store) BriefAttachments(ctx context.Context, b *TaskBrief) ([]models.StagedFile, error) {
	var ups []models.StagedFile
	if err := s.DB.NewSelect().Model(&ups).Where("taskset_id = ?", b.Task.TasksetID).OrderExpr("name ASC, created_at ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("brief attachments: %w", err)
	}
	v := b.Version
	content := strings.Join([]string{v.Prompt, v.SystemPrompt, v.Description, jsonText(v.Args), jsonText(v.AgentConfig), jsonText(v.Validation)}, "\n")
	out := []models.StagedFile{}
	for _, u := range ups {
		if strings.Contains(content, u.Locator()) {
			out = append(out, u)
		}
	}
	return out, nil
}

// jsonText is v as JSON text ("" when it has none).
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
