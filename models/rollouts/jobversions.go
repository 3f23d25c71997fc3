package rollouts

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// BuildShare is how a job's attempts on one environment build did.
type BuildShare struct {
	// Environment and Version name the build ("" and 0 for attempts without an environment,
	// or not started yet); Digest is its image's.
	Environment string
	Version     int
	Digest      string
	Share
}

// VersionShare is how a job's attempts on one version of a task did.
type VersionShare struct {
	TaskVersionID uuid.UUID
	Version       int
	Share
}

// MixedTask is a task a job ran at more than one version.
type MixedTask struct {
	TaskID   uuid.UUID
	TaskName string
	Versions []VersionShare
}

// JobMix is what a job's attempts ran on: each environment build, and the tasks run at more
// than one version, so that results that mix them say so instead of averaging them silently.
type JobMix struct {
	Builds        []BuildShare
	MixedVersions []MixedTask
	// Entrants are the (agent, model) pairs the job ran (see Entrant).
	Entrants []Entrant
}

// JobMix reads what a job the caller can see ran on, in one query over its attempts, and the
// (agent, model) pairs it compared, in one grouped scan of them.
func (s *Store) JobMix(ctx context.Context, c *models.Caller, jobID uuid.UUID) (*JobMix, error) {
	if _, err := s.GetJob(ctx, c, jobID); err != nil {
		return nil, err
	}
	var rows []struct {
		TaskID        *uuid.UUID `bun:"task_id,type:uuid"`
		TaskName      string     `bun:"task_name"`
		TaskVersionID *uuid.UUID `bun:"task_version_id,type:uuid"`
		Version       int        `bun:"version"`
		BuildID       *uuid.UUID `bun:"build_id,type:uuid"`
		Reward        *float64   `bun:"reward"`
		Scored        bool       `bun:"scored"`
	}
	err := s.DB.NewSelect().TableExpr("traces AS tr").Join("LEFT JOIN tasks AS tk ON tk.id = tr.task_id").
		Join("LEFT JOIN task_versions AS tv ON tv.id = tr.task_version_id").
		ColumnExpr("tr.task_id, COALESCE(tk.name, '') AS task_name, tr.task_version_id, COALESCE(tv.version, 0) AS version, tr.reward").
		ColumnExpr("(tr.status = ? AND tr.is_valid AND tr.reward IS NOT NULL) AS scored", models.TraceCompleted).
		ColumnExpr(models.LastBuildExpr+" AS build_id").
		Where("tr.job_id = ?", jobID).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("job mix: %w", err)
	}
	builds := map[uuid.UUID]*tally{}
	versions := map[uuid.UUID]map[uuid.UUID]*tally{}
	names, numbers := map[uuid.UUID]string{}, map[uuid.UUID]int{}
	for _, r := range rows {
		b := uuid.Nil
		if r.BuildID != nil {
			b = *r.BuildID
		}
		if builds[b] == nil {
			builds[b] = &tally{}
		}
		builds[b].add(r.Scored, r.Reward)
		if r.TaskID == nil || r.TaskVersionID == nil {
			continue
		}
		if versions[*r.TaskID] == nil {
			versions[*r.TaskID] = map[uuid.UUID]*tally{}
		}
		v := versions[*r.TaskID]
		if v[*r.TaskVersionID] == nil {
			v[*r.TaskVersionID] = &tally{}
		}
		v[*r.TaskVersionID].add(r.Scored, r.Reward)
		names[*r.TaskID], numbers[*r.TaskVersionID] = r.TaskName, r.Version
	}
	mix := &JobMix{MixedVersions: mixedVersions(versions, names, numbers)}
	if mix.Builds, err = s.buildShares(ctx, builds); err != nil {
		return nil, err
	}
	if mix.Entrants, err = s.jobEntrants(ctx, jobID); err != nil {
		return nil, err
	}
	return mix, nil
}

// buildShares describes each build a job's attempts ran (uuid.Nil: none known) with its share of
// them, by environment, version and digest.
func (s *Store) buildShares(ctx context.Context, builds map[uuid.UUID]*tally) ([]BuildShare, error) {
	out := []BuildShare{}
	ids := make([]uuid.UUID, 0, len(builds))
	for id := range builds {
		if id != uuid.Nil {
			ids = append(ids, id)
		}
	}
	var described []struct {
		ID          uuid.UUID `bun:"id,type:uuid"`
		Environment string    `bun:"environment"`
		Version     int       `bun:"version"`
		Digest      string    `bun:"digest"`
	}
	if len(ids) > 0 {
		if err := s.DB.NewSelect().TableExpr("builds AS b").Join("JOIN registries AS r ON r.id = b.registry_id").
			ColumnExpr("b.id, r.name AS environment, b.version, b.digest").Where("b.id IN (?)", bun.In(ids)).Scan(ctx, &described); err != nil {
			return nil, fmt.Errorf("job mix: %w", err)
		}
	}
	for _, d := range described {
		out = append(out, BuildShare{Environment: d.Environment, Version: d.Version, Digest: d.Digest, Share: builds[d.ID].share()})
	}
	if t := builds[uuid.Nil]; t != nil {
		out = append(out, BuildShare{Share: t.share()})
	}
	slices.SortFunc(out, func(x, y BuildShare) int {
		return cmp.Or(cmp.Compare(x.Environment, y.Environment), cmp.Compare(x.Version, y.Version), cmp.Compare(x.Digest, y.Digest))
	})
	return out, nil
}

// mixedVersions are the tasks whose attempts ran more than one version, each version with its
// share, by task name.
func mixedVersions(versions map[uuid.UUID]map[uuid.UUID]*tally, names map[uuid.UUID]string, numbers map[uuid.UUID]int) []MixedTask {
	out := []MixedTask{}
	for task, vs := range versions {
		if len(vs) < 2 {
			continue
		}
		tv := MixedTask{TaskID: task, TaskName: names[task]}
		for id, t := range vs {
			tv.Versions = append(tv.Versions, VersionShare{TaskVersionID: id, Version: numbers[id], Share: t.share()})
		}
		slices.SortFunc(tv.Versions, func(x, y VersionShare) int { return cmp.Compare(x.Version, y.Version) })
		out = append(out, tv)
	}
	slices.SortFunc(out, func(x, y MixedTask) int { return cmp.Compare(x.TaskName, y.TaskName) })
	return out
}
