package registry

import (
	"cmp"
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// BuildSecrets returns a build's sealed secrets by name (none once the build has ended).
func (s *Store) BuildSecrets(ctx context.Context, id uuid.UUID) (map[string][]byte, error) {
	var rows []models.BuildSecret
	if err := s.DB.NewSelect().Model(&rows).Where("build_id = ?", id).Scan(ctx); err != nil {
		return nil, fmt.Errorf("build secrets: %w", err)
	}
	out := make(map[string][]byte, len(rows))
	for _, r := range rows {
		out[r.Name] = r.Ciphertext
	}
	return out, nil
}

// BuildTerminal reports whether a build status is final.
func BuildTerminal(status string) bool {
	return status == BuildSucceeded || status == BuildFailed || status == BuildCancelled
}

// TriggerBuild names what a build of an uploaded source is for.
type TriggerBuild struct {
	UploadID uuid.UUID
	// RegistryID names an existing environment of the caller's team; otherwise Name does (one
	// is created when the team has none of that name).
	RegistryID *uuid.UUID
	Name       string
	// Kind is RegistryAgent for a brought agent's build; empty (or RegistryEnvironment) builds
	// an environment. A name already taken by the other kind is refused.
	Kind string
	// Description describes an environment the trigger creates.
	Description   string
	Options       models.BuildOptions
	RuntimeConfig *models.RuntimeConfig
	// Placement is where an agent's build runs (BuildRuntime.Placement).
	Placement string
	// Secrets are the build's secrets by name, each sealed for BuildSecretContext(UploadID, name).
	Secrets map[string][]byte
}

// TriggerBuild records a pending build of an uploaded source. Triggering the same upload again
// returns its build; an upload of another team is not found.
func (s *Store) TriggerBuild(ctx context.Context, c *models.Caller, in TriggerBuild) (*models.Build, bool, error) {
	var b models.Build
	created := false
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var up models.BuildUpload
		if err := tx.NewSelect().Model(&up).Where("id = ? AND team_id = ?", in.UploadID, c.TeamID).Scan(ctx); err != nil {
			return models.NotFound(err, "build upload "+in.UploadID.String())
		}
		if up.UsedAt != nil {
			if err := tx.NewSelect().Model(&b).Where("id = ?", up.ID).Scan(ctx); err != nil {
				return models.NotFound(err, "build")
			}
			return nil
		}
		var reg models.Registry
		switch {
		case in.RegistryID != nil:
			if err := tx.NewSelect().Model(&reg).Where("id = ?", *in.RegistryID).Scan(ctx); err != nil {
				return models.NotFound(err, "environment")
			}
			if reg.TeamID != c.TeamID {
				if !reg.Public {
					return fmt.Errorf("environment %s: %w", *in.RegistryID, models.ErrNotFound)
				}
				return fmt.Errorf("environment %s belongs to another team: %w", *in.RegistryID, models.ErrForbidden)
			}
			if err := sameKind(&reg, in.Kind); err != nil {
				return err
			}
			// Both may be given when they name the same environment.
			if in.Name != "" && in.Name != reg.Name {
				return models.ValidationError{{Location: "name", Value: in.Name,
					Message: fmt.Sprintf("registry_id names the environment %q: give its name, or only one of name and registry_id", reg.Name)}}
			}
		default:
			err := tx.NewSelect().Model(&reg).Where("team_id = ? AND name = ?", c.TeamID, in.Name).Scan(ctx)
			if models.IsNoRows(err) {
				reg = models.Registry{ID: uuid.New(), TeamID: c.TeamID, Name: in.Name, Description: in.Description, RegistryType: registryType(in.Kind), BuildArgs: map[string]any{},
					EntryFolder: in.Options.EntryFolder, CreatedAt: models.Now(), UpdatedAt: models.Now()}
				_, err = tx.NewInsert().Model(&reg).Exec(ctx)
			} else if err == nil {
				err = sameKind(&reg, in.Kind)
			}
			if err != nil {
				return fmt.Errorf("environment %q: %w", in.Name, err)
			}
		}
		version, err := nextBuildVersion(ctx, tx, reg.ID)
		if err != nil {
			return err
		}
		rt := models.BuildRuntime{Placement: in.Placement}
		if in.RuntimeConfig != nil {
			rt.RuntimeConfig = *in.RuntimeConfig
		}
		b = models.Build{ID: up.ID, RegistryID: reg.ID, TeamID: c.TeamID, Version: version, Status: BuildPending, SourceIndexStatus: "pending",
			SourceKey: up.SourceKey, RuntimeConfig: rt, Options: in.Options, CreatedBy: up.CreatedBy,
			CreatedAt: models.Now(), UpdatedAt: models.Now()}
		if _, err := tx.NewInsert().Model(&b).Exec(ctx); err != nil {
			return err
		}
		created = true
		if len(in.Secrets) > 0 {
			rows := make([]models.BuildSecret, 0, len(in.Secrets))
			for name, ct := range in.Secrets {
				rows = append(rows, models.BuildSecret{BuildID: b.ID, Name: name, Ciphertext: ct})
			}
			if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
				return err
			}
		}
		_, err = tx.NewUpdate().Model((*models.BuildUpload)(nil)).Set("used_at = ?", models.Now()).Where("id = ?", up.ID).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("trigger build: %w", err)
	}
	return &b, created, nil
}

// GetBuildFor reads a build of an environment the caller sees (its team's, or a public one).
func (s *Store) GetBuildFor(ctx context.Context, c *models.Caller, id uuid.UUID) (*models.BuildRow, error) {
	var row models.BuildRow
	q := s.DB.NewSelect().Model(&row).ColumnExpr("b.*").ColumnExpr("r.name AS registry_name").
		Join("JOIN registries AS r ON r.id = b.registry_id").Where("b.id = ?", id)
	if err := visibleRegistries(q, c).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "build")
	}
	row.CanEdit = c != nil && row.TeamID == c.TeamID
	return &row, nil
}

// ListBuilds pages an environment's builds, newest first.
func (s *Store) ListBuilds(ctx context.Context, c *models.Caller, registryID uuid.UUID, limit int) ([]models.Build, int, error) {
	if _, err := s.GetRegistry(ctx, c, registryID); err != nil {
		return nil, 0, err
	}
	var builds []models.Build
	total, err := s.DB.NewSelect().Model(&builds).Where("registry_id = ?", registryID).
		Order("created_at DESC", "version DESC").Limit(int64(limit)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list builds: %w", err)
	}
	return builds, int(total), nil
}

// BuildUpdate changes a running build; zero fields are left as they are.
type BuildUpdate struct {
	Status string
	// SourceKey moves the build's source to another object (see KeptSourceKey).
	SourceKey string
}

// UpdateBuild records a build's progress. A build that has ended is not changed.
func (s *Store) UpdateBuild(ctx context.Context, id uuid.UUID, u BuildUpdate) error {
	q := s.DB.NewUpdate().Model((*models.Build)(nil)).Set("updated_at = ?", models.Now()).Where("id = ?", id).
		Where("status NOT IN (?)", bun.In([]string{BuildSucceeded, BuildFailed, BuildCancelled}))
	if u.Status != "" {
		q = q.Set("status = ?", u.Status)
	}
	if u.SourceKey != "" {
		q = q.Set("source_key = ?", u.SourceKey)
	}
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("update build: %w", err)
	}
	return nil
}

// BuildResult is how a build ended.
type BuildResult struct {
	Status string
	Error  string
	// Lock is what the image serves; a succeeded build's names its transport.
	Lock      models.BuildLock
	Scenarios []models.Scenario
	// Image is the image the build made, recorded where set; empty fields leave what the row
	// holds.
	Image BuiltImage
}

// BuiltImage is an image a build made: its digest, the object-storage key of its OCI archive,
// its name (environment:version) and the command that serves it.
type BuiltImage struct {
	Digest, ImageKey, ImageName string
	Command                     []string
}

// FinishBuild ends a build: its status, duration and error, and when it succeeded, the
// scenarios it declares and its lock, which must name the transport its image serves. The
// environment's first successful build becomes its latest, unless it asked to be certified
// (Options.Certify); later ones, and those, become latest only through SetLatestBuild. Finishing a build that has already ended changes nothing and returns it as it
// ended.
func (s *Store) FinishBuild(ctx context.Context, id uuid.UUID, r BuildResult) (*models.Build, error) {
	var b models.Build
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.NewSelect().Model(&b).Where("id = ?", id).Scan(ctx); err != nil {
			return models.NotFound(err, "build")
		}
		// A build's secrets live only while it runs.
		if _, err := tx.NewDelete().Model((*models.BuildSecret)(nil)).Where("build_id = ?", id).Exec(ctx); err != nil {
			return err
		}
		if BuildTerminal(b.Status) {
			return nil
		}
		d := models.Now().Sub(b.CreatedAt).Seconds()
		b.Status, b.ErrorMessage, b.DurationSeconds, b.UpdatedAt = r.Status, r.Error, &d, models.Now()
		if r.Status == BuildSucceeded {
			if r.Lock.Transport == "" {
				return fmt.Errorf("build %s succeeded with a lock that names no transport: discovery records the one it reached the image over", id)
			}
			b.Lock = r.Lock
		}
		im := r.Image
		b.Digest, b.ImageKey, b.ImageName = cmp.Or(im.Digest, b.Digest), cmp.Or(im.ImageKey, b.ImageKey), cmp.Or(im.ImageName, b.ImageName)
		if len(im.Command) > 0 {
			b.RuntimeConfig.Command = im.Command
		}
		if _, err := tx.NewUpdate().Model(&b).Column("status", "error_message", "duration_seconds", "lock", "updated_at",
			"digest", "image_key", "image_name", "runtime_config").WherePK().Exec(ctx); err != nil {
			return err
		}
		if r.Status != BuildSucceeded {
			return nil
		}
		if err := insertScenarios(ctx, tx, &b, r.Scenarios); err != nil {
			return err
		}
		if b.Options.Certify != nil {
			return nil // it becomes the latest once its certification passed (set-latest), not before
		}
		_, err := tx.NewUpdate().Model((*models.Registry)(nil)).Set("latest_build_id = ?", b.ID).Set("updated_at = ?", models.Now()).
			Where("id = ? AND latest_build_id IS NULL", b.RegistryID).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("finish build: %w", err)
	}
	return &b, nil
}

// SetLatestBuild makes a succeeded build the one new runs of its environment use.
func (s *Store) SetLatestBuild(ctx context.Context, c *models.Caller, id uuid.UUID, force bool) (*models.BuildRow, error) {
	b, err := s.GetBuildFor(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if !b.CanEdit {
		return nil, fmt.Errorf("build %s: read-only for the caller: %w", id, models.ErrForbidden)
	}
	if b.Status != BuildSucceeded {
		return nil, fmt.Errorf("build %s is %s: only a succeeded build can be the latest: %w", id, b.Status, models.ErrConflict)
	}
	if !force {
		if err := s.certifiedForLatest(ctx, c, b); err != nil {
			return nil, err
		}
	}
	if _, err := s.DB.NewUpdate().Model((*models.Registry)(nil)).Set("latest_build_id = ?", b.ID).Set("updated_at = ?", models.Now()).
		Where("id = ?", b.RegistryID).Exec(ctx); err != nil {
		return nil, fmt.Errorf("set latest build: %w", err)
	}
	return b, nil
}

// AppendBuildLog adds lines to a build's log.
func (s *Store) AppendBuildLog(ctx context.Context, id uuid.UUID, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	var next int
	if err := s.DB.NewSelect().Model((*models.BuildLog)(nil)).ColumnExpr("COALESCE(MAX(seq), -1) + 1").Where("build_id = ?", id).Scan(ctx, &next); err != nil {
		return fmt.Errorf("append build log: %w", err)
	}
	rows := make([]models.BuildLog, len(lines))
	for i, l := range lines {
		rows[i] = models.BuildLog{BuildID: id, Seq: next + i, Line: l, Time: models.Now()}
	}
	if err := models.InsertInBatches(ctx, s.DB, rows, "CONFLICT (build_id, seq) DO NOTHING"); err != nil {
		return fmt.Errorf("append build log: %w", err)
	}
	return nil
}

// BuildLogs pages a build's log after afterSeq.
func (s *Store) BuildLogs(ctx context.Context, id uuid.UUID, afterSeq, limit int) ([]models.BuildLog, error) {
	var logs []models.BuildLog
	if err := s.DB.NewSelect().Model(&logs).Where("build_id = ? AND seq > ?", id, afterSeq).Order("seq ASC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("build logs: %w", err)
	}
	return logs, nil
}

// BuildByID reads a build for the workers (no caller: they act for whoever triggered it).
func (s *Store) BuildByID(ctx context.Context, id uuid.UUID) (*models.Build, error) {
	b := new(models.Build)
	if err := s.DB.NewSelect().Model(b).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "build")
	}
	return b, nil
}

// RegistryByID reads an environment for the workers.
func (s *Store) RegistryByID(ctx context.Context, id uuid.UUID) (*models.Registry, error) {
	r := new(models.Registry)
	if err := s.DB.NewSelect().Model(r).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "environment")
	}
	return r, nil
}

// Slugify is the slug a scenario of this name gets when it is recorded.
func Slugify(name string) string { return slugify(name) }

// BuildByImage finds the succeeded build a runtime config's image names: its image name
// ("<environment>:<version>") or its digest ("sha256:…"), among the team's environments and
// public ones (the team's first).
func (s *Store) BuildByImage(ctx context.Context, teamID uuid.UUID, ref string) (*models.Build, error) {
	b := new(models.Build)
	err := s.DB.NewSelect().Model(b).ColumnExpr("b.*").Join("JOIN registries AS r ON r.id = b.registry_id").
		Where("b.status = ? AND b.image_key <> ''", BuildSucceeded).
		Where("b.image_name = ? OR b.digest = ?", ref, ref).
		Where("r.team_id = ? OR r.public", teamID).
		OrderExpr("CASE WHEN r.team_id = ? THEN 0 ELSE 1 END, b.created_at DESC", teamID).Limit(1).Scan(ctx)
	if err != nil {
		return nil, models.NotFound(err, "image "+ref)
	}
	return b, nil
}
