package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
)

// LatestCertification is the newest certification of a build the caller sees.
func (s *Store) LatestCertification(ctx context.Context, c *models.Caller, buildID uuid.UUID) (*models.Certification, error) {
	if _, err := s.GetBuildFor(ctx, c, buildID); err != nil {
		return nil, err
	}
	cert := new(models.Certification)
	if err := s.DB.NewSelect().Model(cert).Where("cert.build_id = ? AND cert.team_id = ?", buildID, c.TeamID).
		OrderExpr("cert.created_at DESC").Limit(1).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "certification of build "+buildID.String())
	}
	return cert, nil
}

// certifiedForLatest refuses to make b the latest build of an environment that requires a
// passed certification first (Registry.CertifyBeforeLatest) when b's latest certification did not
// pass (ErrConflict, saying what it found).
func (s *Store) certifiedForLatest(ctx context.Context, c *models.Caller, b *models.BuildRow) error {
	var reg models.Registry
	if err := s.DB.NewSelect().Model(&reg).Column("certify_before_latest").Where("id = ?", b.RegistryID).Scan(ctx); err != nil {
		return models.NotFound(err, "the build's environment")
	}
	if !reg.CertifyBeforeLatest {
		return nil
	}
	cert, err := s.LatestCertification(ctx, c, b.ID)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return fmt.Errorf("environment %s requires a passed certification before a build becomes the latest, and build %d has none: "+
			"certify it (proctor env certify), or force: %w", b.RegistryName, b.Version, models.ErrConflict)
	case err != nil:
		return err
	case cert.Status != models.CertificationPassed:
		var flagged []string
		for _, t := range cert.Tasks {
			if len(t.Flags) > 0 {
				flagged = append(flagged, fmt.Sprintf("%s (%s)", t.TaskName, strings.Join(t.Flags, ", ")))
			}
		}
		return fmt.Errorf("environment %s requires a passed certification before a build becomes the latest, and build %d's latest is %s%s: "+
			"certify it again, or force: %w", b.RegistryName, b.Version, cert.Status, listed(": ", flagged), models.ErrConflict)
	}
	return nil
}

// listed is items after sep, joined, or "" for none.
func listed(sep string, items []string) string {
	if len(items) == 0 {
		return ""
	}
	return sep + strings.Join(items, "; ")
}

// SetCertificationPolicy says whether an environment of the caller's team requires a passed
// certification before a build becomes its latest.
func (s *Store) SetCertificationPolicy(ctx context.Context, c *models.Caller, registryID uuid.UUID, required bool) (*models.Registry, error) {
	reg := new(models.Registry)
	if err := s.DB.NewUpdate().Model(reg).Set("certify_before_latest = ?", required).Set("updated_at = ?", models.Now()).
		Where("id = ? AND team_id = ?", registryID, c.TeamID).Returning("*").Scan(ctx); err != nil {
		return nil, models.NotFound(err, "environment "+registryID.String())
	}
	return reg, nil
}
