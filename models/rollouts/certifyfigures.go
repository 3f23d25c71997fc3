package rollouts

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/models"
)

// The figures of a certification, read once its job has ended.

// certifiedAttempt is one ended attempt of a certification's job.
type certifiedAttempt struct {
	ID            uuid.UUID `bun:"id,type:uuid"`
	TaskVersionID uuid.UUID `bun:"task_version_id,type:uuid"`
	TaskName      string    `bun:"task_name"`
	GroupID       string    `bun:"group_id"`
	Status        string    `bun:"status"`
	Reward        *float64  `bun:"reward"`
	Error         string    `bun:"error"`
}

// FinishCertification reads the figures of a certification whose job has ended, per task, and
// records them with its status: failed when the job was cancelled, flagged when a task is,
// passed otherwise. A certification that has finished already stays as it was.
func (s *Store) FinishCertification(ctx context.Context, id uuid.UUID) (*models.Certification, error) {
	cert := new(models.Certification)
	if err := s.DB.NewSelect().Model(cert).Where("cert.id = ?", id).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "certification")
	}
	if cert.Status != models.CertificationRunning {
		return cert, nil
	}
	var job models.Job
	if err := s.DB.NewSelect().Model(&job).Column("status").Where("id = ?", cert.JobID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "the certification's job")
	}
	var rows []certifiedAttempt
	if err := s.DB.NewSelect().TableExpr("traces AS tr").Join("LEFT JOIN tasks AS tk ON tk.id = tr.task_id").
		ColumnExpr("tr.id, tr.task_version_id, COALESCE(tk.name, '') AS task_name, tr.group_id, tr.status, tr.reward, COALESCE(tr.error, '') AS error").
		Where("tr.job_id = ?", cert.JobID).OrderExpr("tk.name, tr.task_version_id").Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("finish certification: %w", err)
	}
	probes, err := s.tamperProbes(ctx, rows)
	if err != nil {
		return nil, err
	}
	cert.Tasks, cert.Status = certify(rows, cert.K, probes), models.CertificationPassed
	cert.Startup, cert.StartupByProvider, err = s.startup(ctx, cert.JobID)
	if err != nil {
		return nil, err
	}
	for _, t := range cert.Tasks {
		if len(t.Flags) > 0 {
			cert.Status = models.CertificationFlagged
		}
	}
	if job.Status == models.JobCancelled {
		cert.Status = models.CertificationFailed
	}
	at := models.Now()
	cert.FinishedAt = &at
	if _, err := s.DB.NewUpdate().Model(cert).Column("status", "tasks", "finished_at", "startup_samples", "startup_p50_ms", "startup_p99_ms", "startup_by_provider").
		Where("id = ? AND status = ?", id, models.CertificationRunning).Exec(ctx); err != nil {
		return nil, fmt.Errorf("finish certification: %w", err)
	}
	return cert, nil
}

// startup measures a job's attempts' environment start-up: from the start of their first try to
// its system message, written once the environment answered MCP and listed its tools; over all
// of them, and per sandbox provider (of the try's instance), by provider name.
func (s *Store) startup(ctx context.Context, jobID uuid.UUID) (models.Startup, []models.ProviderStartup, error) {
	var rows []struct {
		Start    time.Time `bun:"start_time"`
		Ready    time.Time `bun:"started_at"`
		Provider string    `bun:"provider"`
	}
	if err := s.DB.NewSelect().TableExpr("traces AS tr").ColumnExpr("tr.start_time, ev.started_at, COALESCE(MAX(inst.sandbox_provider), '') AS provider").
		Join("JOIN trace_events AS ev ON ev.trace_id = tr.id AND ev.attempt = 1 AND ev.kind = ?", models.EventSystem).
		Join("LEFT JOIN instances AS inst ON inst.trace_id = tr.id AND inst.attempt = 1").
		Where("tr.job_id = ? AND tr.start_time IS NOT NULL", jobID).GroupExpr("tr.id, tr.start_time, ev.started_at").Scan(ctx, &rows); err != nil {
		return models.Startup{}, nil, fmt.Errorf("certification start-up: %w", err)
	}
	all := make([]float64, 0, len(rows))
	byProvider := map[string][]float64{}
	for _, r := range rows {
		ms := float64(r.Ready.Sub(r.Start).Microseconds()) / 1000
		all = append(all, ms)
		byProvider[r.Provider] = append(byProvider[r.Provider], ms)
	}
	split := make([]models.ProviderStartup, 0, len(byProvider))
	for _, name := range slices.Sorted(maps.Keys(byProvider)) {
		split = append(split, models.ProviderStartup{Provider: name, Startup: percentiles(byProvider[name])})
	}
	return percentiles(all), split, nil
}

// percentiles are the p50 and p99 of ms (milliseconds, in any order).
func percentiles(ms []float64) models.Startup {
	out := models.Startup{Samples: len(ms)}
	if len(ms) > 0 {
		slices.Sort(ms)
		p50, p99 := nearestRank(ms, 0.50), nearestRank(ms, 0.99)
		out.P50MS, out.P99MS = &p50, &p99
	}
	return out
}

// nearestRank is the p-th percentile of sorted by the nearest-rank method.
func nearestRank(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// tamperProbes reads what each scored tamper probe tried, by trace, in one read of their tool
// results: its calls of the hidden dispatchers, which of them were errors (refused), and the
// visible tools it claimed success through.
func (s *Store) tamperProbes(ctx context.Context, rows []certifiedAttempt) (map[uuid.UUID]*models.TamperProbe, error) {
	var scored []certifiedAttempt
	var ids []uuid.UUID
	for _, r := range rows {
		if r.GroupID == certifyGroup(TamperModelName, r.TaskVersionID) && r.Status == models.TraceCompleted && r.Reward != nil {
			scored, ids = append(scored, r), append(ids, r.ID)
		}
	}
	results, err := s.toolResultData(ctx, ids, notSuperseded)
	if err != nil {
		return nil, fmt.Errorf("tamper probes: %w", err)
	}
	out := make(map[uuid.UUID]*models.TamperProbe, len(scored))
	for _, r := range scored {
		p := &models.TamperProbe{Tried: []string{}, Refused: []string{}, Claimed: []string{}, Reward: *r.Reward}
		for _, d := range results[r.ID] {
			switch d.Name {
			case agent.SetupHub, agent.EvaluateHub:
				p.Tried = append(p.Tried, d.Name)
				if d.IsError {
					p.Refused = append(p.Refused, d.Name)
				}
			default:
				p.Claimed = append(p.Claimed, d.Name)
			}
		}
		out[r.ID] = p
	}
	return out, nil
}

// certify is the figures of each task from its attempts (in task order): a pass is full reward.
func certify(rows []certifiedAttempt, k int, probes map[uuid.UUID]*models.TamperProbe) []models.CertifiedTask {
	out := []models.CertifiedTask{}
	byVersion := map[uuid.UUID]int{}
	faults := map[int]bool{}
	for _, r := range rows {
		i, ok := byVersion[r.TaskVersionID]
		if !ok {
			i = len(out)
			byVersion[r.TaskVersionID] = i
			out = append(out, models.CertifiedTask{TaskVersionID: r.TaskVersionID, TaskName: r.TaskName, Flags: []string{}})
		}
		t := &out[i]
		scored := r.Status == models.TraceCompleted && r.Reward != nil
		if r.Status == models.TraceError && strings.Contains(r.Error, agent.TaskFaultPrefix) {
			faults[i] = true
		}
		switch r.GroupID {
		case certifyGroup(OracleModelName, r.TaskVersionID):
			if scored {
				t.OracleRuns++
				if *r.Reward >= 1 {
					t.OraclePasses++
				}
			}
		case certifyGroup(IdleModelName, r.TaskVersionID):
			if scored {
				t.IdleReward = r.Reward
			}
		case certifyGroup(RandomModelName, r.TaskVersionID):
			if scored {
				t.RandomReward = r.Reward
			}
		case certifyGroup(TamperModelName, r.TaskVersionID):
			t.Tamper = probes[r.ID]
		}
	}
	for i := range out {
		t := &out[i]
		switch {
		case t.OracleRuns > 0 && t.OraclePasses == 0:
			t.Flags = append(t.Flags, FlagOracleFails)
		case t.OraclePasses < t.OracleRuns:
			t.Flags = append(t.Flags, FlagFlaky)
		}
		if t.IdleReward != nil && *t.IdleReward >= 1 || t.RandomReward != nil && *t.RandomReward >= 1 {
			t.Flags = append(t.Flags, FlagPassesWithoutWork)
		}
		// Tamperable: a hidden dispatcher answered it, or it scored full reward where doing
		// nothing did not.
		if p := t.Tamper; p != nil && (len(p.Refused) < len(p.Tried) || p.Reward >= 1 && (t.IdleReward == nil || *t.IdleReward < 1)) {
			t.Flags = append(t.Flags, FlagTamperable)
		}
		if t.OracleRuns < k || t.IdleReward == nil || t.RandomReward == nil || t.Tamper == nil {
			t.Flags = append(t.Flags, FlagUnfinished)
		}
		if faults[i] {
			t.Flags = append(t.Flags, FlagTaskFault)
		}
	}
	return out
}
