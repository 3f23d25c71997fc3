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

// Entrant is one (agent, model) pair a job ran, and how its attempts did: overall and per task.
// A job of several entrants is a comparison of them; its overall mean reward pools them.
type Entrant struct {
	// Agent is the brought agent's build, nil for the built-in agent loop.
	Agent *AgentRef
	// ModelID and ModelName name the model (nil and "" once it was deleted).
	ModelID   *uuid.UUID
	ModelName string
	Share
	// Tasks are the entrant's results per task, by task name.
	Tasks []EntrantTask
}

// AgentRef names a brought agent's build.
type AgentRef struct {
	BuildID uuid.UUID
	Name    string
	Version int
	Digest  string
}

// Share is how a set of attempts did.
type Share struct {
	Attempts int
	// Scored counts the completed, valid, rewarded attempts; MeanReward is theirs (nil: none).
	Scored     int
	MeanReward *float64
}

// EntrantTask is how an entrant did on one task.
type EntrantTask struct {
	TaskID   uuid.UUID
	TaskName string
	Share
}

// jobEntrants reads the (agent, model) pairs of a job, each with its results overall and per
// task, ordered by agent (the built-in loop first), then model name: one grouped scan of the
// job's attempts, then the names of what it grouped by.
func (s *Store) jobEntrants(ctx context.Context, jobID uuid.UUID) ([]Entrant, error) {
	var groups []struct {
		AgentBuildID *uuid.UUID `bun:"agent_build_id,type:uuid"`
		ModelID      *uuid.UUID `bun:"model_id,type:uuid"`
		TaskID       *uuid.UUID `bun:"task_id,type:uuid"`
		TaskName     string     `bun:"task_name"`
		N            int        `bun:"n"`
		Scored       int        `bun:"scored"`
		Sum          float64    `bun:"sum"`
	}
	agg := s.DB.NewSelect().TableExpr("traces AS tr").ColumnExpr("tr.agent_build_id, tr.model_id, tr.task_id, count(*) AS n").
		ColumnExpr("COUNT("+scoredExpr()+") AS scored, COALESCE(SUM("+scoredExpr()+"), 0.0) AS sum").
		Where("tr.job_id = ?", jobID).GroupExpr("tr.agent_build_id, tr.model_id, tr.task_id")
	if err := s.DB.NewSelect().TableExpr("(?) AS g", agg).ColumnExpr("g.*, COALESCE(tk.name, '') AS task_name").
		Join("LEFT JOIN tasks AS tk ON tk.id = g.task_id").Scan(ctx, &groups); err != nil {
		return nil, fmt.Errorf("job entrants: %w", err)
	}
	type key struct{ agent, model uuid.UUID }
	byKey := map[key]*Entrant{}
	tallies := map[key]*tally{}
	var agentIDs, modelIDs []uuid.UUID
	for _, g := range groups {
		k := key{deref(g.AgentBuildID), deref(g.ModelID)}
		e := byKey[k]
		if e == nil {
			e = &Entrant{ModelID: g.ModelID}
			if g.AgentBuildID != nil {
				e.Agent = &AgentRef{BuildID: *g.AgentBuildID}
				agentIDs = append(agentIDs, *g.AgentBuildID)
			}
			if g.ModelID != nil {
				modelIDs = append(modelIDs, *g.ModelID)
			}
			byKey[k], tallies[k] = e, &tally{}
		}
		task := tally{attempts: g.N, scored: g.Scored, sum: g.Sum}
		tallies[k].merge(task)
		if g.TaskID != nil {
			e.Tasks = append(e.Tasks, EntrantTask{TaskID: *g.TaskID, TaskName: g.TaskName, Share: task.share()})
		}
	}
	agents, modelNames, err := s.entrantNames(ctx, agentIDs, modelIDs)
	if err != nil {
		return nil, err
	}
	out := make([]Entrant, 0, len(byKey))
	for k, e := range byKey {
		e.Share = tallies[k].share()
		if e.Agent != nil {
			if a, ok := agents[e.Agent.BuildID]; ok {
				e.Agent = &a
			}
		}
		if e.ModelID != nil {
			e.ModelName = modelNames[*e.ModelID]
		}
		slices.SortFunc(e.Tasks, func(x, y EntrantTask) int {
			return cmp.Or(cmp.Compare(x.TaskName, y.TaskName), cmp.Compare(x.TaskID.String(), y.TaskID.String()))
		})
		out = append(out, *e)
	}
	slices.SortFunc(out, func(x, y Entrant) int {
		return cmp.Or(cmp.Compare(agentSortKey(x.Agent), agentSortKey(y.Agent)), cmp.Compare(x.ModelName, y.ModelName))
	})
	return out, nil
}

// entrantNames reads the names of the agent builds and models a job's entrants ran.
func (s *Store) entrantNames(ctx context.Context, agentIDs, modelIDs []uuid.UUID) (map[uuid.UUID]AgentRef, map[uuid.UUID]string, error) {
	agents, err := s.agentRefs(ctx, agentIDs)
	if err != nil {
		return nil, nil, err
	}
	names := map[uuid.UUID]string{}
	if len(modelIDs) > 0 {
		var rows []struct {
			ID   uuid.UUID `bun:"id,type:uuid"`
			Name string    `bun:"name"`
		}
		if err := s.DB.NewSelect().TableExpr("llm_models AS m").ColumnExpr("m.id, m.name").Where("m.id IN (?)", bun.In(modelIDs)).Scan(ctx, &rows); err != nil {
			return nil, nil, fmt.Errorf("job entrants: %w", err)
		}
		for _, r := range rows {
			names[r.ID] = r.Name
		}
	}
	return agents, names, nil
}

// agentRefs names the agent builds ids (those that still exist).
func (s *Store) agentRefs(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]AgentRef, error) {
	agents := map[uuid.UUID]AgentRef{}
	if len(ids) == 0 {
		return agents, nil
	}
	var rows []struct {
		ID      uuid.UUID `bun:"id,type:uuid"`
		Name    string    `bun:"name"`
		Version int       `bun:"version"`
		Digest  string    `bun:"digest"`
	}
	if err := s.DB.NewSelect().TableExpr("builds AS b").Join("JOIN registries AS r ON r.id = b.registry_id").
		ColumnExpr("b.id, r.name, b.version, b.digest").Where("b.id IN (?)", bun.In(ids)).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("agent builds: %w", err)
	}
	for _, r := range rows {
		agents[r.ID] = AgentRef{BuildID: r.ID, Name: r.Name, Version: r.Version, Digest: r.Digest}
	}
	return agents, nil
}

// AgentOfTrace names the brought agent's build trace t ran, nil for the built-in loop (or a
// build since deleted).
func (s *Store) AgentOfTrace(ctx context.Context, t *models.Trace) (*AgentRef, error) {
	if t.AgentBuildID == nil {
		return nil, nil
	}
	refs, err := s.agentRefs(ctx, []uuid.UUID{*t.AgentBuildID})
	if err != nil {
		return nil, err
	}
	if a, ok := refs[*t.AgentBuildID]; ok {
		return &a, nil
	}
	return nil, nil
}

// share is a Share of n attempts, scored of them rewarded with sum in all.
// tally adds up attempts as a Share counts them: all of them, the scored ones and the sum of
// their rewards.
type tally struct {
	attempts, scored int
	sum              float64
}

// add counts one attempt, with its reward when it was scored.
func (t *tally) add(scored bool, reward *float64) {
	t.attempts++
	if scored {
		t.scored++
		t.sum += *reward
	}
}

// merge counts the attempts of another tally.
func (t *tally) merge(o tally) {
	t.attempts += o.attempts
	t.scored += o.scored
	t.sum += o.sum
}

func (t tally) share() Share {
	s := Share{Attempts: t.attempts, Scored: t.scored}
	if t.scored > 0 {
		m := t.sum / float64(t.scored)
		s.MeanReward = &m
	}
	return s
}

// agentSortKey orders the built-in loop first, then agents by name and version.
func agentSortKey(a *AgentRef) string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%s:%09d:%s", a.Name, a.Version, a.Digest)
}

func deref(id *uuid.UUID) uuid.UUID {
	if id == nil {
		return uuid.Nil
	}
	return *id
}
