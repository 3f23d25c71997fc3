package registry

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// Brought agents (README, "Bringing your agent") are deployed like environments: a registry of
// registry_type RegistryAgent whose builds make the agent's image through the same pipeline
// (without discovery: an agent serves no MCP). An attempt launched with one records the build
// it runs (Trace.AgentBuildID).

// Registry types: an environment (an MCP server) or a brought agent.
const (
	RegistryEnvironment = "mcp"
	RegistryAgent       = "agent"
)

// registryType is the registry_type a trigger of kind creates.
func registryType(kind string) string {
	if kind == RegistryAgent {
		return RegistryAgent
	}
	return RegistryEnvironment
}

// sameKind refuses a build of one kind into a registry of the other.
func sameKind(reg *models.Registry, kind string) error {
	if want := registryType(kind); reg.RegistryType != want && (want == RegistryAgent || reg.RegistryType == RegistryAgent) {
		what := map[string]string{RegistryAgent: "an agent", RegistryEnvironment: "an environment"}
		return models.ValidationError{{Location: "name", Value: reg.Name,
			Message: fmt.Sprintf("%q is %s of this team, not %s: choose another name", reg.Name, what[reg.RegistryType], what[want])}}
	}
	return nil
}

// AgentRow is a brought agent as its team lists it: the agent and its latest build.
type AgentRow struct {
	ID        uuid.UUID `bun:"id"`
	Name      string    `bun:"name"`
	CreatedAt time.Time `bun:"created_at"`
	UpdatedAt time.Time `bun:"updated_at"`
	// The latest build, when there is one.
	LatestBuildID *uuid.UUID `bun:"latest_build_id"`
	Version       *int       `bun:"version"`
	Digest        *string    `bun:"digest"`
	ImageName     *string    `bun:"image_name"`
	// RuntimeConfig is the latest build's (its placement), zero without one.
	RuntimeConfig models.BuildRuntime `bun:"runtime_config"`
	// Builds counts the agent's builds, of any status.
	Builds int `bun:"builds"`
}

// ListAgents lists the caller's team's brought agents, by name.
func (s *Store) ListAgents(ctx context.Context, c *models.Caller, limit int) ([]AgentRow, int, error) {
	var rows []AgentRow
	q := s.DB.NewSelect().TableExpr("registries AS r").
		ColumnExpr("r.id, r.name, r.created_at, r.updated_at, r.latest_build_id, b.version, b.digest, b.image_name, b.runtime_config").
		ColumnExpr("(SELECT COUNT(*) FROM builds AS ab WHERE ab.registry_id = r.id) AS builds").
		Join("LEFT JOIN builds AS b ON b.id = r.latest_build_id").
		Where("r.team_id = ? AND r.registry_type = ?", c.TeamID, RegistryAgent)
	total, err := q.Count(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list agents: %w", err)
	}
	if err := q.OrderExpr("r.name ASC").Limit(int64(limit)).Scan(ctx, &rows); err != nil {
		return nil, 0, fmt.Errorf("list agents: %w", err)
	}
	return rows, int(total), nil
}

// agentRef is a reference to an agent's build as a launch gives it: the agent's name (or id),
// and what picks the build: the text after ":" (a version) or after "@" (a digest).
type agentRef struct {
	name              string
	version, digest   string
	versioned, pinned bool
}

func parseAgentRef(ref string) agentRef {
	var r agentRef
	r.name, r.digest, r.pinned = strings.Cut(ref, "@")
	if !r.pinned {
		if n, v, ok := strings.Cut(ref, ":"); ok {
			r.name, r.version, r.versioned = n, v, true
		}
	}
	return r
}

// whereAgent narrows q (over registries AS r) to the caller's team's agent name, by id or name.
func whereAgent(q *bun.SelectQuery, c *models.Caller, name string) *bun.SelectQuery {
	q = q.Where("r.team_id = ? AND r.registry_type = ?", c.TeamID, RegistryAgent)
	if id, err := uuid.Parse(name); err == nil {
		return q.Where("r.id = ?", id)
	}
	return q.Where("r.name = ?", name)
}

// IsAgent reports whether ref (as ResolveAgent takes it) names an agent of the caller's team,
// built or not: a submit's agent.type is an agent when it does, a model otherwise.
func (s *Store) IsAgent(ctx context.Context, c *models.Caller, ref string) (bool, error) {
	r := parseAgentRef(ref)
	name := r.name
	if strings.Trim(r.version, "0123456789") != "" {
		name = ref // no NAME:VERSION: a model's name may hold a colon too (llama3:8b)
	}
	ok, err := whereAgent(s.DB.NewSelect().TableExpr("registries AS r"), c, name).Exists(ctx)
	if err != nil {
		return false, fmt.Errorf("find agent: %w", err)
	}
	return ok, nil
}

// ResolveAgent is the build of a brought agent of the caller's team that ref names: the agent's
// name or id, for its latest build, or with ":VERSION" or "@sha256:…" for that build. The build
// must have succeeded. ErrNotFound when no such agent or build; a ValidationError for a build
// that did not succeed or an agent with none yet.
func (s *Store) ResolveAgent(ctx context.Context, c *models.Caller, ref string) (*models.Build, error) {
	r := parseAgentRef(ref)
	name, digest, pinned := r.name, r.digest, r.pinned
	version := 0
	if r.versioned {
		var err error
		if version, err = strconv.Atoi(r.version); err != nil || version < 1 {
			return nil, models.ValidationError{{Location: "agent", Value: ref, Message: "give NAME, NAME:VERSION (a build's version, from 1) or NAME@DIGEST"}}
		}
	}
	var reg models.Registry
	if err := whereAgent(s.DB.NewSelect().Model(&reg), c, name).Scan(ctx); err != nil {
		return nil, models.NotFound(err, fmt.Sprintf("agent %q", name))
	}
	b := new(models.Build)
	bq := s.DB.NewSelect().Model(b).Where("registry_id = ?", reg.ID)
	switch {
	case pinned:
		bq = bq.Where("digest = ?", digest).OrderExpr("version DESC").Limit(1)
	case version > 0:
		bq = bq.Where("version = ?", version)
	case reg.LatestBuildID == nil:
		return nil, models.ValidationError{{Location: "agent", Value: ref, Message: fmt.Sprintf("agent %q has no build that succeeded yet: deploy it (proctor agent deploy)", reg.Name)}}
	default:
		bq = bq.Where("id = ?", *reg.LatestBuildID)
	}
	if err := bq.Scan(ctx); err != nil {
		return nil, models.NotFound(err, fmt.Sprintf("build %q of agent %q", strings.TrimPrefix(ref, name), reg.Name))
	}
	if b.Status != BuildSucceeded {
		return nil, models.ValidationError{{Location: "agent", Value: ref, Message: fmt.Sprintf("build %d of agent %q is %s, not succeeded", b.Version, reg.Name, b.Status)}}
	}
	return b, nil
}
