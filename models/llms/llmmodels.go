package llms

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// UpsertModel adds a catalog entry or updates the one of the same owner and model_name (seeding
// is idempotent). Names are unique per owner: among platform models (no team), and within each
// team; a team's model may share a platform model's name, and ResolveModel prefers the team's.
func (s *Store) UpsertModel(ctx context.Context, m *models.LLMModel) error {
	if m.ID == uuid.Nil {
		m.ID = uuid.New()
	}
	if m.RequestDefaults == nil {
		m.RequestDefaults = map[string]any{}
	}
	m.CreatedAt, m.UpdatedAt = models.Now(), models.Now()
	conflict := "CONFLICT (model_name) WHERE team_id IS NULL DO UPDATE"
	if m.TeamID != nil {
		conflict = "CONFLICT (team_id, model_name) DO UPDATE"
	}
	_, err := s.DB.NewInsert().Model(m).On(conflict).
		Set("name = EXCLUDED.name, provider = EXCLUDED.provider, adapter = EXCLUDED.adapter, base_url = EXCLUDED.base_url, api_key_env = EXCLUDED.api_key_env, context_window = EXCLUDED.context_window, input_cost_per_token = EXCLUDED.input_cost_per_token, output_cost_per_token = EXCLUDED.output_cost_per_token, trainable = EXCLUDED.trainable, training_policy = EXCLUDED.training_policy, updated_at = EXCLUDED.updated_at").
		Returning("id").Exec(ctx)
	if err != nil {
		return fmt.Errorf("upsert model %s: %w", m.ModelName, err)
	}
	return nil
}

// VisibleModels narrows a query of models, aliased m, to those the caller sees: the platform's,
// and its team's (the platform's only, without a caller).
func VisibleModels(q *bun.SelectQuery, c *models.Caller) *bun.SelectQuery {
	if c == nil {
		return q.Where("m.team_id IS NULL")
	}
	return q.Where("m.team_id IS NULL OR m.team_id = ?", c.TeamID)
}

// ListModels pages the catalog entries the caller may use (shared ones and its team's), hidden
// ones excluded, by name.
func (s *Store) ListModels(ctx context.Context, c *models.Caller, limit, offset int) ([]models.LLMModel, int, error) {
	var ms []models.LLMModel
	total, err := VisibleModels(s.DB.NewSelect().Model(&ms), c).Where("NOT m.hidden").
		OrderExpr("m.model_name ASC").Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list models: %w", err)
	}
	return ms, int(total), nil
}

// GetModel reads a catalog entry the caller may use.
func (s *Store) GetModel(ctx context.Context, c *models.Caller, id uuid.UUID) (*models.LLMModel, error) {
	m := new(models.LLMModel)
	if err := VisibleModels(s.DB.NewSelect().Model(m), c).Where("m.id = ?", id).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "get model")
	}
	return m, nil
}

// ResolveModel turns a model_name (or an id) into the catalog entry: the caller's team's model of
// that name when it has one, else the platform's (names are unique per owner, so at most one each).
func (s *Store) ResolveModel(ctx context.Context, c *models.Caller, nameOrID string) (*models.LLMModel, error) {
	if id, err := uuid.Parse(nameOrID); err == nil {
		return s.GetModel(ctx, c, id)
	}
	m := new(models.LLMModel)
	if err := VisibleModels(s.DB.NewSelect().Model(m), c).Where("m.model_name = ?", nameOrID).
		OrderExpr("CASE WHEN m.team_id IS NULL THEN 1 ELSE 0 END").Limit(1).Scan(ctx); err != nil {
		return nil, models.NotFound(err, fmt.Sprintf("model %q", nameOrID))
	}
	return m, nil
}

// ModelUpdate is what PATCH /v2/models/{id} may change; nil fields stay.
type ModelUpdate struct {
	Name            *string
	Hidden          *bool
	RequestDefaults map[string]any
}

// UpdateModel changes a model of the caller's team; shared (platform) models are read-only.
func (s *Store) UpdateModel(ctx context.Context, c *models.Caller, id uuid.UUID, u ModelUpdate) (*models.LLMModel, error) {
	m, err := s.GetModel(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if m.TeamID == nil || *m.TeamID != c.TeamID {
		return nil, fmt.Errorf("model %s is shared by the platform and read-only: %w", m.ModelName, models.ErrForbidden)
	}
	if u.Name != nil {
		m.Name = *u.Name
	}
	if u.Hidden != nil {
		m.Hidden = *u.Hidden
	}
	if u.RequestDefaults != nil {
		m.RequestDefaults = u.RequestDefaults
	}
	m.UpdatedAt = models.Now()
	if _, err := s.DB.NewUpdate().Model(m).Column("name", "hidden", "request_defaults", "updated_at").WherePK().Exec(ctx); err != nil {
		return nil, fmt.Errorf("update model: %w", err)
	}
	return m, nil
}
