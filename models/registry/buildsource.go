package registry

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
)

// CreateBuildUpload reserves a source upload for the caller's team.
func (s *Store) CreateBuildUpload(ctx context.Context, c *models.Caller) (*models.BuildUpload, error) {
	id := uuid.New()
	u := &models.BuildUpload{ID: id, TeamID: c.TeamID, SourceKey: BuildSourceKey(c.TeamID, id), CreatedAt: models.Now()}
	if c.UserID != uuid.Nil {
		u.CreatedBy = &c.UserID
	}
	if _, err := s.DB.NewInsert().Model(u).Exec(ctx); err != nil {
		return nil, fmt.Errorf("create build upload: %w", err)
	}
	return u, nil
}

// BuildSourceKey is the object-storage key of a build's uploaded source.
func BuildSourceKey(teamID, buildID uuid.UUID) string {
	return fmt.Sprintf("builds/%s/%s/source", teamID, buildID)
}

// KeptSourceKey is where a build keeps its source once it has read it from the upload: an object
// no upload URL can write, so the source a build was made from cannot change after it (the
// upload URL is one-time in effect).
func KeptSourceKey(teamID, buildID uuid.UUID) string {
	return fmt.Sprintf("builds/%s/%s/source.kept", teamID, buildID)
}

// SourceEntry is one entry of a build's source, as its index lists it.
type SourceEntry struct {
	// Path is the entry's path within the source, with slashes; Name its last element.
	Path string `json:"path"`
	Name string `json:"name"`
	// Type is file, dir or symlink.
	Type   string `json:"type" enum:"file,dir,symlink"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty" doc:"Files only"`
}

// SourceIndexKey is the object-storage key of a build's source index (a JSON array of
// SourceEntry, sorted by path).
func SourceIndexKey(teamID, buildID uuid.UUID) string {
	return fmt.Sprintf("builds/%s/%s/index.json", teamID, buildID)
}

// SetSourceIndexStatus records whether a build's source index is ready or failed.
func (s *Store) SetSourceIndexStatus(ctx context.Context, id uuid.UUID, status string) error {
	if _, err := s.DB.NewUpdate().Model((*models.Build)(nil)).Set("source_index_status = ?", status).Set("updated_at = ?", models.Now()).
		Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("set source index status: %w", err)
	}
	return nil
}
