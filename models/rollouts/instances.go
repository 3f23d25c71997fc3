package rollouts

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/uptrace/bun"
)

// RateCard prices environment time: a sandbox's hourly rate is Base plus its requested CPUs,
// memory and GPUs at their rates, fixed when it starts; every sandbox is charged at least
// BaselineMinutes (the spec's environment_baseline_minutes).
type RateCard struct {
	Base            float64
	PerCPU          float64
	PerMemoryGB     float64
	PerGPU          GPURates
	BaselineMinutes float64
}

// HourlyRate is the rate of a sandbox with these resources.
func (r RateCard) HourlyRate(cpu float64, memoryMB, gpus int, gpuType string) float64 {
	return models.RoundUSD(r.Base + r.PerCPU*cpu + r.PerMemoryGB*float64(memoryMB)/1024 + float64(gpus)*r.PerGPU.Rate(gpuType))
}

// GPURates is a GPU device's hourly rate by type; "*" prices the types not named.
type GPURates map[string]float64

// Rate is the hourly rate of one device of type t.
func (g GPURates) Rate(t string) float64 {
	if v, ok := g[strings.ToLower(t)]; ok && t != "" {
		return v
	}
	return g["*"]
}

// ParseGPURates reads "h100=4.5,a10g=1.2,*=2" (an empty string is no rates).
func ParseGPURates(s string) (GPURates, error) {
	out := GPURates{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		rate, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || strings.TrimSpace(k) == "" || err != nil || rate < 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
			return nil, fmt.Errorf("GPU rate %q: want TYPE=USD_PER_HOUR (or *=USD_PER_HOUR for every other type)", part)
		}
		out[strings.ToLower(strings.TrimSpace(k))] = rate
	}
	return out, nil
}

// StartInstance records a try's sandbox as running from now, and the line workerLog (when set)
// in the attempt's worker log, in one transaction. Any other instance of the attempt still
// marked running ends here (its worker died, or a start of the same try was retried on another
// worker): an attempt has one live sandbox at a time.
func (s *Store) StartInstance(ctx context.Context, in *models.Instance, workerLog string) error {
	if in.ID == uuid.Nil {
		in.ID = uuid.New()
	}
	in.Status, in.CreatedAt = models.InstanceRunning, models.Now()
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := endInstances(ctx, tx, tx.NewSelect().Model((*models.Instance)(nil)).Where("trace_id = ?", in.TraceID),
			fmt.Sprintf("try %d started", in.Attempt), true); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(in).Exec(ctx); err != nil {
			return err
		}
		// The trace names the sandbox of its current try.
		if _, err := tx.NewUpdate().Model((*models.Trace)(nil)).Set("instance_id = ?", in.ID).Where("id = ?", in.TraceID).Exec(ctx); err != nil {
			return err
		}
		if workerLog == "" {
			return nil
		}
		return appendLogLine(ctx, tx, in.TraceID, LogWorker, "worker", workerLog, in.CreatedAt)
	})
	if err != nil {
		return fmt.Errorf("start instance: %w", err)
	}
	return nil
}

// EndInstance records that the instance stopped now, fixing its duration and cost; billed is
// false for a sandbox that never came up (it is charged its time, not the baseline). An instance
// that has already ended stays as it is.
func (s *Store) EndInstance(ctx context.Context, id uuid.UUID, reason string, billed bool) error {
	return endInstances(ctx, s.DB, s.DB.NewSelect().Model((*models.Instance)(nil)).Where("id = ?", id), reason, billed)
}

// endTraceInstances ends whatever instances of a finished attempt are still running.
func (s *Store) endTraceInstances(ctx context.Context, traceID uuid.UUID, reason string) error {
	return endInstances(ctx, s.DB, s.DB.NewSelect().Model((*models.Instance)(nil)).Where("trace_id = ?", traceID), reason, true)
}

// endInstances ends the running instances sel picks, on db (a transaction's, or the store's).
func endInstances(ctx context.Context, db bun.IDB, sel *bun.SelectQuery, reason string, billed bool) error {
	var running []models.Instance
	if err := sel.Where("status = ?", models.InstanceRunning).Scan(ctx, &running); err != nil {
		return fmt.Errorf("end instances: %w", err)
	}
	at := models.Now()
	for i := range running {
		in := &running[i]
		if !billed {
			in.BaselineMinutes = 0
		}
		minutes, cost := in.Usage(at)
		// Only a running row changes: of two enders racing, the first one's numbers stand, and
		// only the first adds its cost to its job's spend, in the same transaction.
		err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			res, err := tx.NewUpdate().Model((*models.Instance)(nil)).Where("id = ? AND status = ?", in.ID, models.InstanceRunning).
				Set("status = ?", models.InstanceTerminated).Set("terminated_at = ?", at).Set("stop_reason = ?", reason).
				Set("baseline_minutes = ?", in.BaselineMinutes).Set("duration_seconds = ?", minutes*60).Set("cost = ?", cost).
				Exec(ctx)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 || cost == 0 {
				return nil
			}
			_, err = tx.NewUpdate().Model((*models.Job)(nil)).Set("spent_environment_usd = spent_environment_usd + ?", cost).
				Where("id = ?", in.JobID).Exec(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("end instance %s: %w", in.ID, err)
		}
	}
	return nil
}

// InstanceList is a page of instances with the counts of the whole set.
type InstanceList struct {
	Instances  []models.Instance
	Total      int
	Running    int
	Terminated int
}

// ListInstances lists the instances of one of the caller's team's environments, newest first:
// the running ones, and the ended ones too when terminated is set.
func (s *Store) ListInstances(ctx context.Context, c *models.Caller, registryID uuid.UUID, terminated bool, limit, offset int) (*InstanceList, error) {
	var counts []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	if err := s.DB.NewSelect().Model((*models.Instance)(nil)).ColumnExpr("status, count(*) AS n").
		Where("team_id = ? AND registry_id = ?", c.TeamID, registryID).GroupExpr("status").Scan(ctx, &counts); err != nil {
		return nil, fmt.Errorf("count instances: %w", err)
	}
	out := &InstanceList{Instances: []models.Instance{}}
	for _, n := range counts {
		if n.Status == models.InstanceRunning {
			out.Running = n.N
		} else {
			out.Terminated += n.N
		}
	}
	out.Total = out.Running
	q := s.DB.NewSelect().Model(&out.Instances).Where("team_id = ? AND registry_id = ?", c.TeamID, registryID)
	if terminated {
		out.Total += out.Terminated
	} else {
		q = q.Where("status = ?", models.InstanceRunning)
	}
	if err := q.OrderExpr("created_at DESC, id DESC").Limit(int64(limit)).Offset(int64(offset)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return out, nil
}

// TeamInstances returns those of ids that are instances of the registry in the caller's team.
func (s *Store) TeamInstances(ctx context.Context, c *models.Caller, registryID uuid.UUID, ids []uuid.UUID) ([]models.Instance, error) {
	out := []models.Instance{}
	if len(ids) == 0 {
		return out, nil
	}
	if err := s.DB.NewSelect().Model(&out).Where("team_id = ? AND registry_id = ? AND id IN (?)", c.TeamID, registryID, bun.In(ids)).
		Scan(ctx); err != nil {
		return nil, fmt.Errorf("instances: %w", err)
	}
	return out, nil
}

// EnvironmentUsageFilter narrows environment usage.
type EnvironmentUsageFilter struct {
	Since    time.Time
	UserID   *uuid.UUID
	APIKeyID *uuid.UUID
	Status   string
}

// EnvironmentUsageRow is an instance with the names of who launched it.
type EnvironmentUsageRow struct {
	models.Instance `bun:",extend"`
	APIKeyName      *string `bun:"api_key_name,scanonly"`
	UserName        *string `bun:"user_name,scanonly"`
}

// EnvironmentDay is one UTC day of environment usage: the instances started that day.
type EnvironmentDay struct {
	Date  string  `bun:"day"`
	Count int     `bun:"n"`
	Hours float64 `bun:"hours"`
	Cost  float64 `bun:"cost"`
}

// EnvironmentUsage is the team's environment time since a day: totals, a daily chart, and a page
// of instances, newest first.
type EnvironmentUsage struct {
	ActiveCount int
	TotalCount  int
	TotalHours  float64
	TotalCost   float64
	Chart       []EnvironmentDay
	Rows        []EnvironmentUsageRow
}

// EnvironmentUsage sums the instances of the caller's team started since f.Since: the ended
// ones in SQL from their fixed durations and costs, the running ones (few: at most what the
// hosts can run) priced up to now.
func (s *Store) EnvironmentUsage(ctx context.Context, c *models.Caller, f EnvironmentUsageFilter, limit, offset int) (*EnvironmentUsage, error) {
	scope := func(q *bun.SelectQuery) *bun.SelectQuery {
		q = q.Where("inst.team_id = ? AND inst.created_at >= ?", c.TeamID, f.Since.UTC())
		if f.UserID != nil {
			q = q.Where("inst.user_id = ?", *f.UserID)
		}
		if f.APIKeyID != nil {
			q = q.Where("inst.api_key_id = ?", *f.APIKeyID)
		}
		if f.Status != "" {
			q = q.Where("inst.status = ?", f.Status)
		}
		return q
	}
	day := "substr(inst.created_at, 1, 10)" // SQLite keeps times as UTC text
	if s.Dialect == models.Postgres {
		day = "to_char(inst.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
	}
	out := &EnvironmentUsage{Chart: []EnvironmentDay{}}
	var ended []EnvironmentDay
	if err := scope(s.DB.NewSelect().Model((*models.Instance)(nil))).ColumnExpr(day+" AS day, count(*) AS n").
		ColumnExpr("COALESCE(SUM(inst.duration_seconds), 0.0) / 3600.0 AS hours, COALESCE(SUM(inst.cost), 0.0) AS cost").
		Where("inst.status <> ?", models.InstanceRunning).GroupExpr("day").Scan(ctx, &ended); err != nil {
		return nil, fmt.Errorf("environment usage: %w", err)
	}
	var running []models.Instance
	if err := scope(s.DB.NewSelect().Model(&running)).Where("inst.status = ?", models.InstanceRunning).Scan(ctx); err != nil {
		return nil, fmt.Errorf("environment usage: %w", err)
	}
	days := map[string]*EnvironmentDay{}
	for i := range ended {
		days[ended[i].Date] = &ended[i]
	}
	at := models.Now()
	for i := range running {
		d := running[i].CreatedAt.UTC().Format("2006-01-02")
		if days[d] == nil {
			days[d] = &EnvironmentDay{Date: d}
		}
		minutes, cost := running[i].Usage(at)
		days[d].Count++
		days[d].Hours += minutes / 60
		days[d].Cost += cost
	}
	for _, d := range days {
		d.Cost, d.Hours = models.RoundUSD(d.Cost), models.RoundUSD(d.Hours)
		out.Chart = append(out.Chart, *d)
		out.TotalCount += d.Count
		out.TotalHours += d.Hours
		out.TotalCost += d.Cost
	}
	sort.Slice(out.Chart, func(i, j int) bool { return out.Chart[i].Date < out.Chart[j].Date })
	out.ActiveCount, out.TotalHours, out.TotalCost = len(running), models.RoundUSD(out.TotalHours), models.RoundUSD(out.TotalCost)
	out.Rows = []EnvironmentUsageRow{}
	if err := scope(s.DB.NewSelect().Model(&out.Rows)).ColumnExpr("inst.*").
		ColumnExpr("(SELECT k.name FROM api_keys AS k WHERE k.id = inst.api_key_id) AS api_key_name").
		ColumnExpr("(SELECT u.name FROM users AS u WHERE u.id = inst.user_id) AS user_name").
		OrderExpr("inst.created_at DESC, inst.id DESC").Limit(int64(limit)).Offset(int64(offset)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("environment usage: %w", err)
	}
	return out, nil
}

// TraceEnvironment is the environment an attempt ran (or will run) and its build.
type TraceEnvironment struct {
	Registry      *registry.RegistryRow
	Build         *models.Build // nil when the environment has no build
	CanViewSource bool
}

// EnvironmentOfTrace finds the environment of an attempt: the build its current try's sandbox
// runs (from its instance), else the environment's latest build. Nil when its task names none.
func (s *Store) EnvironmentOfTrace(ctx context.Context, c *models.Caller, t *TraceRow) (*TraceEnvironment, error) {
	var buildID, registryID *uuid.UUID
	if t.InstanceID != nil {
		var in models.Instance
		if err := s.DB.NewSelect().Model(&in).Column("build_id", "registry_id").Where("id = ?", *t.InstanceID).Scan(ctx); err == nil {
			buildID, registryID = in.BuildID, in.RegistryID
		}
	}
	if registryID == nil && t.TaskVersionID != nil {
		if err := s.DB.NewSelect().Table("task_versions").Column("registry_id").Where("id = ?", *t.TaskVersionID).Scan(ctx, &registryID); err != nil && !models.IsNoRows(err) {
			return nil, fmt.Errorf("trace environment: %w", err)
		}
	}
	if registryID == nil {
		return nil, nil
	}
	row, err := registry.Of(s.Store).GetRegistry(ctx, c, *registryID)
	if errors.Is(err, models.ErrNotFound) {
		return nil, nil // an environment the caller may not see is shown as none
	} else if err != nil {
		return nil, err
	}
	env := &TraceEnvironment{Registry: row, Build: row.LatestBuild}
	if buildID != nil {
		b := new(models.Build)
		if err := s.DB.NewSelect().Model(b).Where("id = ?", *buildID).Scan(ctx); err == nil {
			env.Build = b
		}
	}
	env.CanViewSource = env.Build != nil && env.Build.SourceKey != ""
	return env, nil
}
