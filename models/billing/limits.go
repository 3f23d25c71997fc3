package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// Spending limit intervals and actions.
const (
	IntervalWeek  = "week"
	IntervalMonth = "month"
	ActionAlert   = "alert"
	ActionBlock   = "block"
)

// LimitRow is a limit with the names of its scope and its current period's spend.
type LimitRow struct {
	models.SpendingLimit
	APIKeyName string
	MemberName string
	SpendUSD   float64
}

// PeriodStart is when the current period of interval began: Monday 00:00 UTC for a week, the
// first of the month for a month.
func PeriodStart(interval string, t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	if interval == IntervalWeek {
		return day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
	}
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// spend is what the limit's scope has spent in its current period: the cost of its inference
// calls (an API key's completions and the model steps of the attempts it launched; a member's
// the same for everything they launched) and of the environment time of those attempts.
func (s *Store) spend(ctx context.Context, l *models.SpendingLimit) (float64, error) {
	since := PeriodStart(l.Interval, models.Now())
	scope := func(q *bun.SelectQuery) *bun.SelectQuery {
		if l.APIKeyID != nil {
			return q.Where("api_key_id = ?", *l.APIKeyID)
		}
		return q.Where("user_id = (SELECT user_id FROM memberships WHERE id = ?)", *l.MembershipID)
	}
	var total float64
	if err := scope(s.DB.NewSelect().Model((*models.InferenceLog)(nil)).ColumnExpr("COALESCE(SUM(cost), 0.0)").
		Where("team_id = ? AND created_at >= ?", l.TeamID, since)).Scan(ctx, &total); err != nil {
		return 0, fmt.Errorf("spend: %w", err)
	}
	env, err := s.environmentSpend(ctx, l.TeamID, since, scope)
	if err != nil {
		return 0, err
	}
	return models.RoundUSD(total + env), nil
}

func (s *Store) limitRow(ctx context.Context, l *models.SpendingLimit) (LimitRow, error) {
	r := LimitRow{SpendingLimit: *l}
	var err error
	if r.SpendUSD, err = s.spend(ctx, l); err != nil {
		return r, err
	}
	if l.APIKeyID != nil {
		s.DB.NewSelect().Table("api_keys").Column("name").Where("id = ?", *l.APIKeyID).Scan(ctx, &r.APIKeyName) //nolint:errcheck // a name for display
	} else {
		s.DB.NewSelect().TableExpr("memberships AS m").ColumnExpr("u.name").Join("JOIN users AS u ON u.id = m.user_id"). //nolint:errcheck // a name for display
																	Where("m.id = ?", *l.MembershipID).Scan(ctx, &r.MemberName)
	}
	return r, nil
}

// ListLimits lists the team's limits with their current spend.
func (s *Store) ListLimits(ctx context.Context, c *models.Caller) ([]LimitRow, error) {
	var ls []models.SpendingLimit
	if err := s.DB.NewSelect().Model(&ls).Where("team_id = ?", c.TeamID).Order("created_at ASC", "id ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	out := make([]LimitRow, 0, len(ls))
	for i := range ls {
		r, err := s.limitRow(ctx, &ls[i])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// CreateLimit adds a limit to the caller's team; its scope (an API key or a membership) and its
// parent must be the team's.
func (s *Store) CreateLimit(ctx context.Context, c *models.Caller, l *models.SpendingLimit) (LimitRow, error) {
	var verr models.ValidationError
	if l.APIKeyID != nil {
		if n, _ := s.DB.NewSelect().Table("api_keys").Where("id = ? AND team_id = ?", *l.APIKeyID, c.TeamID).Count(ctx); n == 0 {
			verr = append(verr, models.FieldError{Location: "api_key_id", Message: "no API key of your team has this id", Value: l.APIKeyID.String()})
		}
	}
	if l.MembershipID != nil {
		if n, _ := s.DB.NewSelect().Table("memberships").Where("id = ? AND team_id = ?", *l.MembershipID, c.TeamID).Count(ctx); n == 0 {
			verr = append(verr, models.FieldError{Location: "membership_id", Message: "no member of your team has this membership id", Value: *l.MembershipID})
		}
	}
	if l.ParentLimitID != nil {
		if n, _ := s.DB.NewSelect().Model((*models.SpendingLimit)(nil)).Where("id = ? AND team_id = ?", *l.ParentLimitID, c.TeamID).Count(ctx); n == 0 {
			verr = append(verr, models.FieldError{Location: "parent_limit_id", Message: "no limit of your team has this id", Value: l.ParentLimitID.String()})
		}
	}
	if len(verr) > 0 {
		return LimitRow{}, verr
	}
	l.ID, l.TeamID, l.CreatedAt, l.UpdatedAt = uuid.New(), c.TeamID, models.Now(), models.Now()
	if _, err := s.DB.NewInsert().Model(l).Exec(ctx); err != nil {
		return LimitRow{}, fmt.Errorf("create limit: %w", err)
	}
	return s.limitRow(ctx, l)
}

// LimitUpdate is what PATCH may change; scope and interval cannot.
type LimitUpdate struct {
	AmountUSD        *float64
	Enabled          *bool
	ThresholdPercent *float64
}

// UpdateLimit changes a limit of the caller's team.
func (s *Store) UpdateLimit(ctx context.Context, c *models.Caller, id uuid.UUID, u LimitUpdate) (LimitRow, error) {
	var l models.SpendingLimit
	if err := s.DB.NewSelect().Model(&l).Where("id = ? AND team_id = ?", id, c.TeamID).Scan(ctx); err != nil {
		return LimitRow{}, models.NotFound(err, "limit")
	}
	if u.AmountUSD != nil {
		l.AmountUSD = *u.AmountUSD
	}
	if u.Enabled != nil {
		l.Enabled = *u.Enabled
	}
	if u.ThresholdPercent != nil {
		l.ThresholdPercent = *u.ThresholdPercent
	}
	l.UpdatedAt = models.Now()
	if _, err := s.DB.NewUpdate().Model(&l).Column("amount_usd", "enabled", "threshold_percent", "updated_at").WherePK().Exec(ctx); err != nil {
		return LimitRow{}, err
	}
	return s.limitRow(ctx, &l)
}

// DeleteLimit deletes a limit of the caller's team.
func (s *Store) DeleteLimit(ctx context.Context, c *models.Caller, id uuid.UUID) error {
	res, err := s.DB.NewDelete().Model((*models.SpendingLimit)(nil)).Where("id = ? AND team_id = ?", id, c.TeamID).Exec(ctx)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("limit %s: %w", id, models.ErrNotFound)
	}
	return nil
}

// ReachedBlock is the first enabled block limit on the caller (their API key, or them as a
// member) whose period's spend has reached threshold_percent of its amount (its row without the
// scope's names); nil when none has.
func (s *Store) ReachedBlock(ctx context.Context, c *models.Caller) (*LimitRow, error) {
	var ls []models.SpendingLimit
	q := s.DB.NewSelect().Model(&ls).Where("team_id = ? AND enabled AND action = ?", c.TeamID, ActionBlock).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			q = q.Where("membership_id = ?", c.MembershipID)
			if c.Kind == models.CredentialAPIKey {
				q = q.WhereOr("api_key_id = ?", c.APIKeyID)
			}
			return q
		})
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	// Every launch and completion asks: the spend alone, not the names a listing shows.
	for i := range ls {
		spend, err := s.spend(ctx, &ls[i])
		if err != nil {
			return nil, err
		}
		if ls[i].Reached(spend) {
			return &LimitRow{SpendingLimit: ls[i], SpendUSD: spend}, nil
		}
	}
	return nil, nil
}

// DueAlerts records an alert for every enabled alert limit whose current period's spend has
// reached its threshold and has none yet this period, and returns every alert not yet sent
// (those just recorded and those a crash left unsent), with their limits.
func (s *Store) DueAlerts(ctx context.Context) ([]models.LimitAlert, error) {
	var ls []models.SpendingLimit
	if err := s.DB.NewSelect().Model(&ls).Where("enabled AND action = ?", ActionAlert).Scan(ctx); err != nil {
		return nil, fmt.Errorf("alert limits: %w", err)
	}
	byID := map[uuid.UUID]*models.SpendingLimit{}
	for i := range ls {
		l := &ls[i]
		byID[l.ID] = l
		spend, err := s.spend(ctx, l)
		if err != nil {
			return nil, err
		}
		if !l.Reached(spend) {
			continue
		}
		var email string
		q := s.DB.NewSelect().TableExpr("memberships AS m").ColumnExpr("u.email").Join("JOIN users AS u ON u.id = m.user_id")
		if l.MembershipID != nil {
			q = q.Where("m.id = ?", *l.MembershipID)
		} else {
			q = q.Where("m.id = (SELECT membership_id FROM api_keys WHERE id = ?)", *l.APIKeyID)
		}
		if err := q.Scan(ctx, &email); err != nil {
			return nil, fmt.Errorf("alert recipient of limit %s: %w", l.ID, err)
		}
		a := &models.LimitAlert{LimitID: l.ID, PeriodStart: PeriodStart(l.Interval, models.Now()), Recipient: email, SpendUSD: spend, CreatedAt: models.Now()}
		if _, err := s.DB.NewInsert().Model(a).On("CONFLICT (limit_id, period_start) DO NOTHING").Exec(ctx); err != nil {
			return nil, fmt.Errorf("record alert: %w", err)
		}
	}
	var due []models.LimitAlert
	if err := s.DB.NewSelect().Model(&due).Where("sent_at IS NULL").Order("created_at ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("due alerts: %w", err)
	}
	out := due[:0]
	for _, a := range due {
		if a.Limit = byID[a.LimitID]; a.Limit != nil { // a disabled limit's pending alert waits
			out = append(out, a)
		}
	}
	return out, nil
}

// AlertSent marks an alert mailed.
func (s *Store) AlertSent(ctx context.Context, a *models.LimitAlert) error {
	_, err := s.DB.NewUpdate().Model((*models.LimitAlert)(nil)).Set("sent_at = ?", models.Now()).
		Where("limit_id = ? AND period_start = ?", a.LimitID, a.PeriodStart).Exec(ctx)
	return err
}

// environmentSpend is what a scope's instances cost since a time: the ended ones' fixed costs,
// and the running ones priced up to now.
func (s *Store) environmentSpend(ctx context.Context, teamID uuid.UUID, since time.Time, scope func(*bun.SelectQuery) *bun.SelectQuery) (float64, error) {
	var ended float64
	if err := scope(s.DB.NewSelect().Model((*models.Instance)(nil)).ColumnExpr("COALESCE(SUM(cost), 0.0)").
		Where("team_id = ? AND created_at >= ? AND status <> ?", teamID, since.UTC(), models.InstanceRunning)).Scan(ctx, &ended); err != nil {
		return 0, fmt.Errorf("environment spend: %w", err)
	}
	var running []models.Instance
	if err := scope(s.DB.NewSelect().Model(&running).Where("team_id = ? AND created_at >= ? AND status = ?", teamID, since.UTC(), models.InstanceRunning)).
		Scan(ctx); err != nil {
		return 0, fmt.Errorf("environment spend: %w", err)
	}
	at := models.Now()
	for i := range running {
		_, cost := running[i].Usage(at)
		ended += cost
	}
	return ended, nil
}
