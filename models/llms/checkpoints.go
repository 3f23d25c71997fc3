package llms

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// ownModel loads a model of the caller's team (403 for a visible shared one).
func (s *Store) ownModel(ctx context.Context, c *models.Caller, id uuid.UUID) (*models.LLMModel, error) {
	m, err := s.GetModel(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if m.TeamID == nil || *m.TeamID != c.TeamID {
		return nil, fmt.Errorf("model %s is shared by the platform and read-only: %w", m.ModelName, models.ErrForbidden)
	}
	return m, nil
}

// ForkModel makes a trainable copy of a trainable model for the caller's team, named name.
func (s *Store) ForkModel(ctx context.Context, c *models.Caller, sourceID uuid.UUID, name string) (*models.LLMModel, error) {
	src, err := s.GetModel(ctx, c, sourceID)
	if err != nil {
		return nil, err
	}
	if !src.Trainable {
		return nil, models.ValidationError{{Location: "source_model_id", Message: "model " + src.ModelName + " is not trainable: only a trainable base can be forked", Value: sourceID.String()}}
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, models.ValidationError{{Location: "name", Message: "a fork needs a name", Value: name}}
	}
	f := &models.LLMModel{ID: uuid.New(), TeamID: &c.TeamID, ModelName: ModelNameOf(name), Name: name, Provider: src.Provider, Adapter: src.Adapter,
		SDKAgentType: src.SDKAgentType, BaseURL: src.BaseURL, APIKeyEnv: src.APIKeyEnv, ContextWindow: src.ContextWindow,
		InputCostPerToken: src.InputCostPerToken, OutputCostPerToken: src.OutputCostPerToken, RequestDefaults: src.RequestDefaults,
		Trainable: true, TrainingPolicy: src.TrainingPolicy, ForkOfModelID: &src.ID, CreatedAt: models.Now(), UpdatedAt: models.Now()}
	if f.RequestDefaults == nil {
		f.RequestDefaults = map[string]any{}
	}
	// Names are unique per owner (a team's among its own, the platform's among the platform's):
	// a fork conflicts with its team's models and with the platform's, which every team sees,
	// never with another team's, whose names it must not learn nor be able to take.
	platform, err := s.DB.NewSelect().Model((*models.LLMModel)(nil)).Where("team_id IS NULL AND model_name = ?", f.ModelName).Exists(ctx)
	if err != nil {
		return nil, fmt.Errorf("fork model: %w", err)
	}
	if platform {
		return nil, fmt.Errorf("a platform model is named %q: %w", f.ModelName, models.ErrConflict)
	}
	if _, err := s.DB.NewInsert().Model(f).Exec(ctx); err != nil {
		if models.IsUniqueViolation(err) {
			return nil, fmt.Errorf("your team has a model named %q: %w", f.ModelName, models.ErrConflict)
		}
		return nil, fmt.Errorf("fork model: %w", err)
	}
	return f, nil
}

// ModelNameOf is the model_name a fork named name gets: the name with each run of characters a
// model name cannot hold (anything but letters, digits and . _ : / -) turned into one dash, and
// no dash at either end; "fork" when nothing is left.
func ModelNameOf(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._:/-", r):
			b.WriteRune(r)
			dash = r == '-'
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	if out := strings.Trim(b.String(), "-"); out != "" {
		return out
	}
	return "fork"
}

// AddCheckpoint registers a checkpoint of a fork of the caller's team (a trainer's report).
func (s *Store) AddCheckpoint(ctx context.Context, c *models.Caller, modelID uuid.UUID, cp *models.Checkpoint) error {
	m, err := s.ownModel(ctx, c, modelID)
	if err != nil {
		return err
	}
	if m.ForkOfModelID == nil {
		return fmt.Errorf("model %s is no fork: checkpoints belong to forks of trainable models: %w", m.ModelName, models.ErrConflict)
	}
	cp.ID, cp.ModelID, cp.CreatedAt = uuid.New(), modelID, models.Now()
	if cp.Metrics == nil {
		cp.Metrics = map[string]any{}
	}
	if _, err := s.DB.NewInsert().Model(cp).Exec(ctx); err != nil {
		if models.IsUniqueViolation(err) {
			return fmt.Errorf("model %s has a checkpoint named %q: %w", m.ModelName, cp.Name, models.ErrConflict)
		}
		return fmt.Errorf("add checkpoint: %w", err)
	}
	return nil
}

// CheckpointRow is a checkpoint with what ran on it.
type CheckpointRow struct {
	models.Checkpoint
	IsActive   bool
	Jobs       []JobRef
	MeanReward *float64
}

// JobRef names a job.
type JobRef struct {
	ID   uuid.UUID `bun:"id,type:uuid"`
	Name string    `bun:"name"`
}

// ListCheckpoints lists a model's checkpoints, newest first, with the jobs whose attempts called
// each and their mean reward.
func (s *Store) ListCheckpoints(ctx context.Context, c *models.Caller, modelID uuid.UUID) ([]CheckpointRow, error) {
	m, err := s.GetModel(ctx, c, modelID)
	if err != nil {
		return nil, err
	}
	var cps []models.Checkpoint
	if err := s.DB.NewSelect().Model(&cps).Where("model_id = ?", modelID).OrderExpr("created_at DESC, id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	out := make([]CheckpointRow, len(cps))
	for i, cp := range cps {
		out[i] = CheckpointRow{Checkpoint: cp, IsActive: m.HeadCheckpointID != nil && *m.HeadCheckpointID == cp.ID, Jobs: []JobRef{}}
		traces := s.DB.NewSelect().Model((*models.InferenceLog)(nil)).Column("trace_id").Where("checkpoint_id = ? AND team_id = ? AND trace_id IS NOT NULL", cp.ID, c.TeamID)
		if err := s.DB.NewSelect().TableExpr("jobs AS j").ColumnExpr("DISTINCT j.id, j.name").
			Where("j.id IN (SELECT t.job_id FROM traces AS t WHERE t.id IN (?))", traces).Scan(ctx, &out[i].Jobs); err != nil {
			return nil, fmt.Errorf("checkpoint jobs: %w", err)
		}
		if err := s.DB.NewSelect().TableExpr("traces AS t").ColumnExpr("AVG(t.reward)").Where("t.id IN (?)", traces).Scan(ctx, &out[i].MeanReward); err != nil {
			return nil, fmt.Errorf("checkpoint reward: %w", err)
		}
	}
	return out, nil
}

// SetHead points a fork of the caller's team at one of its checkpoints.
func (s *Store) SetHead(ctx context.Context, c *models.Caller, modelID, checkpointID uuid.UUID) (*models.LLMModel, error) {
	m, err := s.ownModel(ctx, c, modelID)
	if err != nil {
		return nil, err
	}
	if n, err := s.DB.NewSelect().Model((*models.Checkpoint)(nil)).Where("id = ? AND model_id = ?", checkpointID, modelID).Count(ctx); err != nil || n == 0 {
		if err == nil {
			err = models.ValidationError{{Location: "checkpoint_id", Message: "no checkpoint of this model has this id", Value: checkpointID.String()}}
		}
		return nil, err
	}
	m.HeadCheckpointID, m.UpdatedAt = &checkpointID, models.Now()
	if _, err := s.DB.NewUpdate().Model(m).Column("head_checkpoint_id", "updated_at").WherePK().Exec(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckpointTrace is an attempt whose model calls a checkpoint answered.
type CheckpointTrace struct {
	TraceID   uuid.UUID `bun:"id,type:uuid"`
	Status    string    `bun:"status"`
	CreatedAt time.Time `bun:"created_at"`
	Reward    *float64  `bun:"reward"`
}

// CheckpointTraces lists, newest first, the caller's team's attempts a checkpoint answered.
func (s *Store) CheckpointTraces(ctx context.Context, c *models.Caller, modelID, checkpointID uuid.UUID, limit int) ([]CheckpointTrace, error) {
	if _, err := s.GetModel(ctx, c, modelID); err != nil {
		return nil, err
	}
	if n, _ := s.DB.NewSelect().Model((*models.Checkpoint)(nil)).Where("id = ? AND model_id = ?", checkpointID, modelID).Count(ctx); n == 0 {
		return nil, fmt.Errorf("checkpoint %s: %w", checkpointID, models.ErrNotFound)
	}
	traces := s.DB.NewSelect().Model((*models.InferenceLog)(nil)).Column("trace_id").Where("checkpoint_id = ? AND team_id = ? AND trace_id IS NOT NULL", checkpointID, c.TeamID)
	out := []CheckpointTrace{}
	err := s.DB.NewSelect().TableExpr("traces AS t").Column("t.id", "t.status", "t.created_at", "t.reward").Where("t.id IN (?)", traces).
		OrderExpr("t.created_at DESC, t.id DESC").Limit(int64(limit)).Scan(ctx, &out)
	return out, err
}

// CheckpointCounts counts each model's checkpoints.
func (s *Store) CheckpointCounts(ctx context.Context, modelIDs []uuid.UUID) (map[uuid.UUID]int, error) {
	out := map[uuid.UUID]int{}
	if len(modelIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		ModelID uuid.UUID `bun:"model_id,type:uuid"`
		N       int       `bun:"n"`
	}
	err := s.DB.NewSelect().Model((*models.Checkpoint)(nil)).Column("model_id").ColumnExpr("count(*) AS n").
		Where("model_id IN (?)", bun.In(modelIDs)).Group("model_id").Scan(ctx, &rows)
	for _, r := range rows {
		out[r.ModelID] = r.N
	}
	return out, err
}

// HeadCheckpoint is the checkpoint a model's calls go to (nil without one).
func (s *Store) HeadCheckpoint(ctx context.Context, m *models.LLMModel) (*models.Checkpoint, error) {
	if m.HeadCheckpointID == nil {
		return nil, nil
	}
	var cp models.Checkpoint
	if err := s.DB.NewSelect().Model(&cp).Where("id = ?", *m.HeadCheckpointID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "head checkpoint")
	}
	return &cp, nil
}

// ModelNames maps model ids to their model_name.
func (s *Store) ModelNames(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]string, error) {
	out := map[uuid.UUID]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var ms []models.LLMModel
	if err := s.DB.NewSelect().Model(&ms).Column("id", "model_name").Where("m.id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
		return nil, err
	}
	for _, m := range ms {
		out[m.ID] = m.ModelName
	}
	return out, nil
}
