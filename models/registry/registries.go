package registry

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// Build statuses: pending (queued), running (building), then succeeded, failed or cancelled.
const (
	BuildPending   = "pending"
	BuildRunning   = "running"
	BuildSucceeded = "succeeded"
	BuildFailed    = "failed"
	BuildCancelled = "cancelled"
)

// NewRegistry is what creating an environment takes.
type NewRegistry struct {
	Name        string
	Description string
	Public      bool
	ProjectID   *uuid.UUID
	RepoURL     string
	Branch      string
	EntryFolder string
	BuildArgs   map[string]any
}

// CreateRegistry adds an environment to the caller's team; names are unique within a team.
func (s *Store) CreateRegistry(ctx context.Context, c *models.Caller, in NewRegistry) (*models.Registry, error) {
	if strings.TrimSpace(in.Name) == "" {
		return nil, fmt.Errorf("create registry: name is empty")
	}
	if in.BuildArgs == nil {
		in.BuildArgs = map[string]any{}
	}
	r := &models.Registry{
		ID: uuid.New(), TeamID: c.TeamID, ProjectID: in.ProjectID, Name: in.Name, RegistryType: "mcp",
		Public: in.Public, Description: in.Description, Branch: in.Branch, BuildArgs: in.BuildArgs,
		EntryFolder: in.EntryFolder, RepoURL: in.RepoURL, CreatedAt: models.Now(), UpdatedAt: models.Now(),
	}
	if _, err := s.DB.NewInsert().Model(r).Exec(ctx); err != nil {
		if models.IsUniqueViolation(err) {
			return nil, fmt.Errorf("create registry %q: an environment of that name exists in the team: %w", in.Name, models.ErrConflict)
		}
		return nil, fmt.Errorf("create registry: %w", err)
	}
	return r, nil
}

// NewBuild is what recording a build takes.
type NewBuild struct {
	Status        string
	Digest        string
	ImageName     string
	SourceKey     string
	Branch        string
	RepoURL       string
	Lock          models.BuildLock
	RuntimeConfig models.BuildRuntime
	Scenarios     []models.Scenario
	// SetLatest makes the build the one new runs use.
	SetLatest bool
}

// CreateBuild records a build of an environment with the scenarios it declares; versions count
// up per environment. A succeeded build given no transport serves stdio: the platform runs every
// environment over it.
func (s *Store) CreateBuild(ctx context.Context, registryID uuid.UUID, in NewBuild) (*models.Build, error) {
	if in.Status == BuildSucceeded && in.Lock.Transport == "" {
		in.Lock.Transport = models.TransportStdio
	}
	b := &models.Build{
		ID: uuid.New(), RegistryID: registryID, Status: in.Status, SourceIndexStatus: "pending",
		Digest: in.Digest, ImageName: in.ImageName, SourceKey: in.SourceKey, Branch: in.Branch, RepoURL: in.RepoURL,
		Lock: in.Lock, RuntimeConfig: in.RuntimeConfig, CreatedAt: models.Now(), UpdatedAt: models.Now(),
	}
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var reg models.Registry
		if err := tx.NewSelect().Model(&reg).Where("id = ?", registryID).Scan(ctx); err != nil {
			return models.NotFound(err, "registry")
		}
		b.TeamID = reg.TeamID
		v, err := nextBuildVersion(ctx, tx, registryID)
		if err != nil {
			return err
		}
		b.Version = v
		if _, err := tx.NewInsert().Model(b).Exec(ctx); err != nil {
			return err
		}
		if err := insertScenarios(ctx, tx, b, in.Scenarios); err != nil {
			return err
		}
		if in.SetLatest {
			_, err := tx.NewUpdate().Model((*models.Registry)(nil)).Set("latest_build_id = ?", b.ID).Set("updated_at = ?", models.Now()).Where("id = ?", registryID).Exec(ctx)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create build: %w", err)
	}
	return b, nil
}

// nextBuildVersion is the version the next build of an environment takes: versions count up.
func nextBuildVersion(ctx context.Context, tx bun.Tx, registryID uuid.UUID) (int, error) {
	var maxVersion int
	err := tx.NewSelect().Model((*models.Build)(nil)).ColumnExpr("COALESCE(MAX(version), 0)").Where("registry_id = ?", registryID).Scan(ctx, &maxVersion)
	return maxVersion + 1, err
}

// insertScenarios records the scenarios build b declares, with their defaults filled (slug from
// the name, empty schema, arguments and metadata). A scenario already recorded is kept.
func insertScenarios(ctx context.Context, tx bun.Tx, b *models.Build, scenarios []models.Scenario) error {
	if len(scenarios) == 0 {
		return nil
	}
	for i := range scenarios {
		sc := &scenarios[i]
		sc.ID, sc.RegistryID, sc.BuildID, sc.CreatedAt = uuid.New(), b.RegistryID, b.ID, models.Now()
		if sc.Slug == "" {
			sc.Slug = slugify(sc.Name)
		}
		if sc.ArgsSchema == nil {
			sc.ArgsSchema = map[string]any{}
		}
		if sc.Arguments == nil {
			sc.Arguments = []any{}
		}
		if sc.Metadata == nil {
			sc.Metadata = map[string]any{}
		}
	}
	_, err := tx.NewInsert().Model(&scenarios).On("CONFLICT (build_id, name) DO NOTHING").Exec(ctx)
	return err
}

// RegistryRow is an environment as one caller sees it.
type RegistryRow struct {
	models.Registry `bun:",extend"`
	StarCount       int64 `bun:"star_count,scanonly"`
	IsStarred       bool  `bun:"is_starred,scanonly"`
	CanEdit         bool  `bun:"-"`
	// LatestBuild and LatestScenarios are filled where asked for.
	LatestBuild     *models.Build     `bun:"-"`
	LatestScenarios []models.Scenario `bun:"-"`
}

// RegistryQuery is the registry list's filter, sort and page.
type RegistryQuery struct {
	Search                 string
	MatchTemplates         bool
	IncludeLatestScenarios bool
	PublicOnly             bool
	OwnerOnly              bool
	ProjectID              *uuid.UUID
	SortBy                 string
	Limit, Offset          int
}

// visibleRegistries restricts a query to what the caller may see: its team's environments and
// public ones (everyone sees public ones; an anonymous caller sees only those).
func visibleRegistries(q *bun.SelectQuery, c *models.Caller) *bun.SelectQuery {
	if c == nil {
		return q.Where("r.public")
	}
	return q.WhereGroup(" AND ", func(w *bun.SelectQuery) *bun.SelectQuery {
		return w.Where("r.team_id = ?", c.TeamID).WhereOr("r.public")
	})
}

func registryColumns(q *bun.SelectQuery, c *models.Caller) *bun.SelectQuery {
	user := uuid.Nil
	if c != nil {
		user = c.UserID
	}
	return q.ColumnExpr("r.*").
		ColumnExpr("(SELECT COUNT(*) FROM registry_stars AS st WHERE st.registry_id = r.id) AS star_count").
		ColumnExpr("EXISTS (SELECT 1 FROM registry_stars AS st WHERE st.registry_id = r.id AND st.user_id = ?) AS is_starred", user)
}

// ListRegistries pages the environments visible to the caller.
func (s *Store) ListRegistries(ctx context.Context, c *models.Caller, q RegistryQuery) ([]RegistryRow, int, error) {
	var rows []RegistryRow
	sel := registryColumns(s.DB.NewSelect().Model(&rows), c)
	switch {
	case q.PublicOnly:
		sel = sel.Where("r.public")
	case q.OwnerOnly:
		sel = sel.Where("r.team_id = ?", c.TeamID)
	default:
		sel = visibleRegistries(sel, c)
	}
	// Brought agents are listed apart (ListAgents): they are no environments to run tasks in.
	sel = sel.Where("r.registry_type <> ?", RegistryAgent)
	if q.ProjectID != nil {
		sel = sel.Where("r.project_id = ?", *q.ProjectID)
	}
	if q.Search != "" {
		pattern := "%" + models.EscapeLike(strings.ToLower(q.Search)) + "%"
		sel = sel.WhereGroup(" AND ", func(w *bun.SelectQuery) *bun.SelectQuery {
			w = w.Where("LOWER(r.name) LIKE ? ESCAPE '\\'", pattern)
			if q.MatchTemplates {
				w = w.WhereOr("LOWER(r.description) LIKE ? ESCAPE '\\'", pattern).
					WhereOr(`EXISTS (SELECT 1 FROM scenarios AS sc WHERE sc.build_id = r.latest_build_id AND (
						LOWER(sc.name) LIKE ? ESCAPE '\' OR LOWER(sc.description) LIKE ? ESCAPE '\' OR LOWER(sc.setup_description) LIKE ? ESCAPE '\'))`,
						pattern, pattern, pattern)
			}
			return w
		})
	}
	switch q.SortBy {
	case models.SortDate:
		sel = sel.OrderExpr("r.updated_at DESC")
	case models.SortName:
		sel = sel.OrderExpr("LOWER(r.name) ASC")
	case models.SortStars:
		sel = sel.OrderExpr("star_count DESC")
	default:
		sel = sel.OrderExpr("is_starred DESC").OrderExpr("r.updated_at DESC")
	}
	total, err := sel.OrderExpr("r.id ASC").Limit(int64(q.Limit)).Offset(int64(q.Offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list registries: %w", err)
	}
	for i := range rows {
		rows[i].CanEdit = c != nil && rows[i].TeamID == c.TeamID
	}
	if q.IncludeLatestScenarios {
		if err := s.attachLatestScenarios(ctx, rows); err != nil {
			return nil, 0, err
		}
	}
	return rows, int(total), nil
}

// attachLatestScenarios loads the latest build's scenarios of every row in one query.
func (s *Store) attachLatestScenarios(ctx context.Context, rows []RegistryRow) error {
	var builds []uuid.UUID
	for _, r := range rows {
		if r.LatestBuildID != nil {
			builds = append(builds, *r.LatestBuildID)
		}
	}
	if len(builds) == 0 {
		return nil
	}
	var scs []models.Scenario
	if err := s.DB.NewSelect().Model(&scs).Where("build_id IN (?)", bun.In(builds)).Order("name ASC").Scan(ctx); err != nil {
		return fmt.Errorf("latest scenarios: %w", err)
	}
	byBuild := map[uuid.UUID][]models.Scenario{}
	for _, sc := range scs {
		byBuild[sc.BuildID] = append(byBuild[sc.BuildID], sc)
	}
	for i := range rows {
		rows[i].LatestScenarios = []models.Scenario{}
		if rows[i].LatestBuildID != nil {
			if scs := byBuild[*rows[i].LatestBuildID]; scs != nil {
				rows[i].LatestScenarios = scs
			}
		}
	}
	return nil
}

// GetRegistry reads an environment visible to the caller, with its latest build.
func (s *Store) GetRegistry(ctx context.Context, c *models.Caller, id uuid.UUID) (*RegistryRow, error) {
	var row RegistryRow
	sel := visibleRegistries(registryColumns(s.DB.NewSelect().Model(&row), c), c).Where("r.id = ?", id)
	if err := sel.Scan(ctx); err != nil {
		return nil, models.NotFound(err, "get registry")
	}
	row.CanEdit = c != nil && row.TeamID == c.TeamID
	if row.LatestBuildID != nil {
		b := new(models.Build)
		if err := s.DB.NewSelect().Model(b).Where("id = ?", *row.LatestBuildID).Scan(ctx); err != nil {
			return nil, fmt.Errorf("get registry: latest build: %w", err)
		}
		row.LatestBuild = b
	}
	return &row, nil
}

// FindRegistry resolves an environment by id or by name, preferring the caller's team's own.
func (s *Store) FindRegistry(ctx context.Context, c *models.Caller, nameOrID string) (*RegistryRow, error) {
	if id, err := uuid.Parse(nameOrID); err == nil {
		return s.GetRegistry(ctx, c, id)
	}
	var row RegistryRow
	sel := visibleRegistries(registryColumns(s.DB.NewSelect().Model(&row), c), c).Where("r.name = ? AND r.registry_type <> ?", nameOrID, RegistryAgent)
	if c != nil {
		sel = sel.OrderExpr("CASE WHEN r.team_id = ? THEN 0 ELSE 1 END", c.TeamID)
	}
	if err := sel.OrderExpr("r.created_at ASC").Limit(1).Scan(ctx); err != nil {
		return nil, models.NotFound(err, fmt.Sprintf("registry %q", nameOrID))
	}
	return s.GetRegistry(ctx, c, row.ID)
}

// GetBuild reads a build of an environment.
func (s *Store) GetBuild(ctx context.Context, registryID, buildID uuid.UUID) (*models.Build, error) {
	b := new(models.Build)
	if err := s.DB.NewSelect().Model(b).Where("id = ? AND registry_id = ?", buildID, registryID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "get build")
	}
	return b, nil
}

// ListScenarios lists the scenarios one build of an environment declares, by name.
func (s *Store) ListScenarios(ctx context.Context, buildID uuid.UUID) ([]models.Scenario, error) {
	var scs []models.Scenario
	if err := s.DB.NewSelect().Model(&scs).Where("build_id = ?", buildID).Order("name ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list scenarios: %w", err)
	}
	return scs, nil
}

// StarRegistry stars an environment for the caller; starring twice is not an error.
func (s *Store) StarRegistry(ctx context.Context, c *models.Caller, registryID uuid.UUID) error {
	star := &models.RegistryStar{RegistryID: registryID, UserID: c.UserID, CreatedAt: models.Now()}
	if _, err := s.DB.NewInsert().Model(star).On("CONFLICT DO NOTHING").Exec(ctx); err != nil {
		return fmt.Errorf("star registry: %w", err)
	}
	return nil
}

// slugify makes a URL-safe lower-case slug of a name.
func slugify(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}
