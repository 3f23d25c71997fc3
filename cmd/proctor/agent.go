package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// cmdAgentDeploy builds a brought agent from a source directory, as env deploy builds an
// environment (a build of kind agent, which discovers nothing), and says how to run it.
func cmdAgentDeploy(stdout io.Writer) flagsBody {
	return deployCommand("agent", "Dockerfile or main package", "", stdout, io.Discard, func(_ context.Context, _ *apiClient, _ deployBuild, name string) error {
		fmt.Fprintf(stdout, "run it: proctor eval TASKSET --agent %s --model MODEL\n", name)
		return nil
	})
}

// agentRow is an agent as `proctor agent list` shows it.
type agentRow struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Version   *int      `json:"version"`
	Digest    *string   `json:"digest"`
	Placement string    `json:"placement"`
	Builds    int       `json:"builds"`
	UpdatedAt time.Time `json:"updated_at"`
}

// cmdAgentList lists the team's brought agents.
func cmdAgentList(stdout io.Writer) flagsBody {
	return listCommand[agentRow]{
		path: "/v2/agents", limit: 100, limitUsage: "at most this many (1..500)",
		columns: []string{"NAME", "LATEST", "DIGEST", "PLACEMENT", "BUILDS", "UPDATED", "ID"},
		row: func(r agentRow) []any {
			latest, digest := "(none succeeded yet)", ""
			if r.Version != nil {
				latest = fmt.Sprint(*r.Version)
			}
			if r.Digest != nil {
				digest = shortDigest(*r.Digest)
			}
			return []any{r.Name, latest, digest, r.Placement, r.Builds, r.UpdatedAt.Local().Format("2006-01-02 15:04"), r.ID}
		},
	}.body(stdout)
}
