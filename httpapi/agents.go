package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
)

// Brought agents (a Proctor extension; README, "Bringing your agent"): an agent is deployed
// like an environment (POST /v2/builds/trigger with kind agent) and launched beside one by the
// launch routes' agent field.

// Agent is a brought agent of the caller's team, with its latest build.
type Agent struct {
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// LatestBuildID and the rest describe the build launches use by default; null before the
	// first build that succeeded.
	LatestBuildID *uuid.UUID `json:"latest_build_id" doc:"The build a launch naming the agent runs; null before the first that succeeded"`
	Version       *int       `json:"version" doc:"The latest build's version (launch another as NAME:VERSION)"`
	Digest        *string    `json:"digest" doc:"The latest build's image digest (launch a build as NAME@DIGEST)"`
	ImageName     *string    `json:"image_name"`
	Placement     string     `json:"placement" enum:"beside,inside" doc:"Where the latest build runs: beside the environment, or inside it (deployed with placement inside)"`
	Builds        int        `json:"builds" minimum:"0" doc:"Builds of any status; list them with GET /v2/registries/{id}/builds"`
}

type listAgentsInput struct {
	Limit int `query:"limit" minimum:"1" maximum:"500" default:"100"`
}

type listAgentsOutput struct {
	Body struct {
		Items []Agent `json:"items" nullable:"false"`
		Total int     `json:"total"`
	}
}

func (s *Server) registerAgents() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-agents", Method: http.MethodGet, Path: "/agents", Tags: []string{"Agents"},
		Summary: "List the team's brought agents (Proctor extension)",
		Description: "The agents the team deployed (POST /v2/builds/trigger with `kind: agent`, or `proctor agent deploy`), by name, each with " +
			"its latest build. Launch one with the `agent` field of POST /v2/rollouts/run or /v2/rollouts/run_list.",
	}, authKeyOrSession), s.listAgents)
}

// listAgents serves GET /v2/agents.
func (s *Server) listAgents(ctx context.Context, in *listAgentsInput) (*listAgentsOutput, error) {
	rows, total, err := s.registry.ListAgents(ctx, callerFrom(ctx), in.Limit)
	if err != nil {
		return nil, err
	}
	out := &listAgentsOutput{}
	out.Body.Total, out.Body.Items = total, make([]Agent, len(rows))
	for i, r := range rows {
		out.Body.Items[i] = Agent{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, LatestBuildID: r.LatestBuildID,
			Version: r.Version, Digest: r.Digest, ImageName: r.ImageName, Builds: r.Builds,
			Placement: cmp.Or(r.RuntimeConfig.Placement, models.PlacementBeside)}
	}
	return out, nil
}

// resolveAgent is the build a launch's agent field names (nil for none), checked against the
// models it will call: the oracle answers no model calls.
func (s *Server) resolveAgent(ctx context.Context, ref string, modelIDs ...uuid.UUID) (*uuid.UUID, error) {
	if ref == "" {
		return nil, nil
	}
	c := callerFrom(ctx)
	b, err := s.registry.ResolveAgent(ctx, c, ref)
	if err != nil {
		return nil, storeError(err, "agent")
	}
	for _, id := range modelIDs {
		if m, err := s.llms.GetModel(ctx, c, id); err == nil && m.Builtin() {
			return nil, validation("body.agent", "a brought agent calls models through the gateway, and the "+m.BuiltinName()+" answers none: launch it with a catalog model", ref)
		}
	}
	return &b.ID, nil
}
