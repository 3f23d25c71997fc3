package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/uptrace/bun"
)

// Inference routes: what a model call was made for.
const (
	RouteAgent       = "agent"       // a model step of an attempt
	RouteCompletions = "completions" // POST /v2/completions
)

func idText(id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	return id.String()
}

// RecordInference writes one model call's row, and adds it to its day's usage and to its
// attempt's job's spend, in one transaction.
func (s *Store) RecordInference(ctx context.Context, l *models.InferenceLog) error {
	if l.ID == uuid.Nil {
		l.ID = uuid.New()
	}
	if l.CreatedAt.IsZero() {
		l.CreatedAt = models.Now()
	}
	d := &models.InferenceDaily{TeamID: l.TeamID, Day: l.CreatedAt.UTC().Format("2006-01-02"), ModelID: l.ModelID.String(), UserID: idText(l.UserID),
		APIKeyID: idText(l.APIKeyID), ByokCredential: idText(l.ByokCredentialID), BYOK: l.BYOK, Route: l.Route, Requests: 1, Cost: l.Cost,
		PromptTokens: int64(l.PromptTokens), CompletionTokens: int64(l.CompletionTokens)}
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(l).Exec(ctx); err != nil {
			return err
		}
		_, err := tx.NewInsert().Model(d).
			On("CONFLICT (team_id, day, model_id, user_id, api_key_id, byok_credential, byok, route) DO UPDATE").
			Set("requests = inference_daily.requests + EXCLUDED.requests").
			Set("cost = inference_daily.cost + EXCLUDED.cost").
			Set("prompt_tokens = inference_daily.prompt_tokens + EXCLUDED.prompt_tokens").
			Set("completion_tokens = inference_daily.completion_tokens + EXCLUDED.completion_tokens").Exec(ctx)
		if err != nil || l.TraceID == nil || l.Cost == 0 {
			return err
		}
		return addJobInference(ctx, tx, *l.TraceID, l.Cost)
	})
	if err != nil {
		return fmt.Errorf("record inference: %w", err)
	}
	return nil
}

// ModelLogs pages, newest first, the caller's team's calls of a model the caller can see.
func (s *Store) ModelLogs(ctx context.Context, c *models.Caller, modelID uuid.UUID, limit, offset int) ([]models.InferenceLog, int, error) {
	var m models.LLMModel
	if err := llms.VisibleModels(s.DB.NewSelect().Model(&m), c).Where("m.id = ?", modelID).Scan(ctx); err != nil {
		return nil, 0, models.NotFound(err, "model")
	}
	var logs []models.InferenceLog
	total, err := s.DB.NewSelect().Model(&logs).Where("model_id = ? AND team_id = ?", modelID, c.TeamID).
		OrderExpr("created_at DESC, id DESC").Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("model logs: %w", err)
	}
	return logs, int(total), nil
}

// InferenceCounts counts the team's calls of each model.
func (s *Store) InferenceCounts(ctx context.Context, teamID uuid.UUID, modelIDs []uuid.UUID) (map[uuid.UUID]int, error) {
	out := map[uuid.UUID]int{}
	if len(modelIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		ModelID uuid.UUID `bun:"model_id,type:uuid"`
		N       int       `bun:"n"`
	}
	err := s.DB.NewSelect().Model((*models.InferenceLog)(nil)).Column("model_id").ColumnExpr("count(*) AS n").
		Where("team_id = ? AND model_id IN (?)", teamID, bun.In(modelIDs)).Group("model_id").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("inference counts: %w", err)
	}
	for _, r := range rows {
		out[r.ModelID] = r.N
	}
	return out, nil
}

// UsageFilter narrows the inference usage log.
type UsageFilter struct {
	Since                                     time.Time
	UserID, APIKeyID, ByokCredentialID, Model *uuid.UUID
	Route                                     string
	Limit, Offset                             int
}

// UsageRow is an inference row with its model's and API key's names.
type UsageRow struct {
	models.InferenceLog `bun:",extend"`
	ModelName           string  `bun:"model_name"`
	APIKeyName          *string `bun:"api_key_name"`
}

// InferenceUsage pages the team's inference rows since f.Since, newest first.
func (s *Store) InferenceUsage(ctx context.Context, c *models.Caller, f UsageFilter) ([]UsageRow, int, error) {
	var rows []UsageRow
	q := s.DB.NewSelect().Model(&rows).
		ColumnExpr("il.*").ColumnExpr("m.model_name AS model_name").ColumnExpr("ak.name AS api_key_name").
		Join("JOIN llm_models AS m ON m.id = il.model_id").
		Join("LEFT JOIN api_keys AS ak ON ak.id = il.api_key_id").
		Where("il.team_id = ? AND il.created_at >= ?", c.TeamID, f.Since)
	for col, v := range map[string]*uuid.UUID{"il.user_id": f.UserID, "il.api_key_id": f.APIKeyID, "il.byok_credential_id": f.ByokCredentialID, "il.model_id": f.Model} {
		if v != nil {
			q = q.Where("? = ?", bun.Ident(col), *v)
		}
	}
	if f.Route != "" {
		q = q.Where("il.route = ?", f.Route)
	}
	total, err := q.OrderExpr("il.created_at DESC, il.id DESC").Limit(int64(f.Limit)).Offset(int64(f.Offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("inference usage: %w", err)
	}
	return rows, int(total), nil
}

// UsageBucket is one group of one time bucket of inference calls.
type UsageBucket struct {
	Bucket           string  `bun:"bucket"` // "YYYY-MM-DD" or "YYYY-MM-DD HH" (UTC)
	Group            string  `bun:"grp"`
	Requests         int     `bun:"requests"`
	Cost             float64 `bun:"cost"`
	PromptTokens     int     `bun:"prompt_tokens"`
	CompletionTokens int     `bun:"completion_tokens"`
}

// Inference usage groupings.
var usageGroups = map[string]string{
	"":        "'all'",
	"api_key": "COALESCE(CAST(api_key_id AS TEXT), '')",
	"byok":    "CASE WHEN byok THEN 'byok' ELSE 'platform' END",
	"model":   "CAST(model_id AS TEXT)",
	"user":    "COALESCE(CAST(user_id AS TEXT), '')",
	"route":   "route",
}

// Daily usage groupings, over inference_daily.
var dailyGroups = map[string]string{
	"":        "'all'",
	"api_key": "api_key_id",
	"byok":    "CASE WHEN byok THEN 'byok' ELSE 'platform' END",
	"model":   "model_id",
	"user":    "user_id",
	"route":   "route",
}

// InferenceBuckets aggregates the team's calls by hour or day (UTC) and by groupBy (api_key,
// byok, model, user, route, or "" for none), in SQL: hours from the calls in [start, end);
// days from the daily usage of every UTC day that [start, end) touches.
func (s *Store) InferenceBuckets(ctx context.Context, c *models.Caller, start, end time.Time, hourly bool, groupBy string, f UsageFilter) ([]UsageBucket, error) {
	grp, ok := usageGroups[groupBy]
	if !ok {
		return nil, fmt.Errorf("group_by %q: %w", groupBy, models.ErrNotFound)
	}
	if !hourly {
		q := s.DB.NewSelect().Model((*models.InferenceDaily)(nil)).
			ColumnExpr("day AS bucket").ColumnExpr(dailyGroups[groupBy]+" AS grp").ColumnExpr("SUM(requests) AS requests").
			ColumnExpr("SUM(cost) AS cost").ColumnExpr("SUM(prompt_tokens) AS prompt_tokens").ColumnExpr("SUM(completion_tokens) AS completion_tokens").
			Where("team_id = ? AND day >= ? AND day <= ?", c.TeamID, start.UTC().Format("2006-01-02"), end.UTC().Add(-time.Nanosecond).Format("2006-01-02"))
		for col, v := range map[string]*uuid.UUID{"user_id": f.UserID, "api_key_id": f.APIKeyID, "byok_credential": f.ByokCredentialID} {
			if v != nil {
				q = q.Where("? = ?", bun.Ident(col), v.String())
			}
		}
		var out []UsageBucket
		if err := q.GroupExpr("bucket, grp").OrderExpr("bucket ASC, grp ASC").Scan(ctx, &out); err != nil {
			return nil, fmt.Errorf("inference buckets: %w", err)
		}
		return out, nil
	}
	bucket := "substr(created_at, 1, 13)" // SQLite keeps times as UTC text, "YYYY-MM-DD HH:MM:SS…"
	if s.Dialect == models.Postgres {
		bucket = "date_trunc('hour', created_at AT TIME ZONE 'UTC')" // formatted once per group, below
	}
	q := s.DB.NewSelect().Model((*models.InferenceLog)(nil)).
		ColumnExpr(bucket+" AS bucket").ColumnExpr(grp+" AS grp").ColumnExpr("count(*) AS requests").
		ColumnExpr("COALESCE(SUM(cost), 0.0) AS cost").ColumnExpr("COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens").
		ColumnExpr("COALESCE(SUM(completion_tokens), 0) AS completion_tokens").
		Where("team_id = ? AND created_at >= ? AND created_at < ?", c.TeamID, start.UTC(), end.UTC())
	for col, v := range map[string]*uuid.UUID{"user_id": f.UserID, "api_key_id": f.APIKeyID, "byok_credential_id": f.ByokCredentialID} {
		if v != nil {
			q = q.Where("? = ?", bun.Ident(col), *v)
		}
	}
	q = q.GroupExpr("bucket, grp")
	if s.Dialect == models.Postgres {
		q = s.DB.NewSelect().TableExpr("(?) AS g", q).ColumnExpr("to_char(g.bucket, 'YYYY-MM-DD HH24') AS bucket").
			ColumnExpr("g.grp, g.requests, g.cost, g.prompt_tokens, g.completion_tokens").OrderExpr("g.bucket ASC, g.grp ASC")
	} else {
		q = q.OrderExpr("bucket ASC, grp ASC")
	}
	var out []UsageBucket
	if err := q.Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("inference buckets: %w", err)
	}
	return out, nil
}
