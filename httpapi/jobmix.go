package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/rollouts"
)

// registerJobMix registers what a job ran on (a Proctor extension).
func (s *Server) registerJobMix() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-job-mix", Method: http.MethodGet, Path: "/jobs/{job_id}/mix", Tags: []string{"Jobs"},
		Summary: "What a job ran on: environment builds, task versions, and the (agent, model) pairs it compared (Proctor extension)",
		Description: "The environment builds the job's attempts ran on (each with its attempts, scored attempts and their mean reward), " +
			"and the tasks it ran at more than one version (each version likewise). A job whose attempts span builds or versions " +
			"mixes results that are not comparable: its mean reward and per-task table average across them, and this says so; " +
			"`proctor compare` and GET /v2/jobs/compare pair by build and version instead. Attempts not started yet count under a " +
			"build with an empty digest. The entrants are the (agent, model) pairs the job ran (the agent is null for the built-in " +
			"agent loop), each with its results overall and per task: a job of several compares them, and its own mean reward pools them.",
		Errors: []int{http.StatusNotFound},
	}, authOptional), s.getJobMix)
}

type jobMixInput struct {
	JobID uuid.UUID `path:"job_id"`
}

// BuildShare is how a job's attempts on one environment build did.
type BuildShare struct {
	Environment string   `json:"environment" doc:"the environment's name; empty for attempts that ran on none (or not yet)"`
	Version     int      `json:"build_version"`
	Digest      string   `json:"digest"`
	Attempts    int      `json:"attempts"`
	Scored      int      `json:"scored_attempts" doc:"completed, valid, rewarded"`
	MeanReward  *float64 `json:"mean_reward" doc:"of the scored attempts; null without any"`
}

// VersionShare is how a job's attempts on one version of a task did.
type VersionShare struct {
	TaskVersionID uuid.UUID `json:"task_version_id"`
	Version       int       `json:"version"`
	Attempts      int       `json:"attempts"`
	Scored        int       `json:"scored_attempts"`
	MeanReward    *float64  `json:"mean_reward"`
}

// MixedTask is a task a job ran at more than one version.
type MixedTask struct {
	TaskID   uuid.UUID      `json:"task_id"`
	TaskName string         `json:"task_name"`
	Versions []VersionShare `json:"versions" nullable:"false"`
}

// AgentBuild names a brought agent's build.
type AgentBuild struct {
	BuildID uuid.UUID `json:"build_id"`
	Name    string    `json:"name"`
	Version int       `json:"build_version"`
	Digest  string    `json:"digest"`
}

// EntrantTask is how an entrant did on one task.
type EntrantTask struct {
	TaskID     uuid.UUID `json:"task_id"`
	TaskName   string    `json:"task_name"`
	Attempts   int       `json:"attempts"`
	Scored     int       `json:"scored_attempts"`
	MeanReward *float64  `json:"mean_reward"`
}

// Entrant is one (agent, model) pair a job ran, and how it did.
type Entrant struct {
	Agent      *AgentBuild   `json:"agent" doc:"the brought agent's build; null for the built-in agent loop"`
	ModelID    *uuid.UUID    `json:"model_id" doc:"null once the model was deleted"`
	ModelName  string        `json:"model_name"`
	Attempts   int           `json:"attempts"`
	Scored     int           `json:"scored_attempts" doc:"completed, valid, rewarded"`
	MeanReward *float64      `json:"mean_reward" doc:"of the scored attempts; null without any"`
	Tasks      []EntrantTask `json:"tasks" nullable:"false" doc:"per task, by task name"`
}

// JobMix is the answer of GET /v2/jobs/{job_id}/mix.
type JobMix struct {
	Entrants []Entrant    `json:"entrants" nullable:"false" doc:"the (agent, model) pairs the job ran: the built-in loop first, then by agent; then by model name"`
	Builds   []BuildShare `json:"environment_builds" nullable:"false"`
	// Mixed is true when the results mix builds of one environment, or versions of a task.
	Mixed         bool        `json:"mixed" doc:"the results mix environment builds (of one environment) or task versions"`
	MixedVersions []MixedTask `json:"tasks_with_several_versions" nullable:"false"`
}

type jobMixOutput struct{ Body JobMix }

// getJobMix serves GET /v2/jobs/{job_id}/mix.
func (s *Server) getJobMix(ctx context.Context, in *jobMixInput) (*jobMixOutput, error) {
	m, err := s.rollouts.JobMix(ctx, callerFrom(ctx), in.JobID)
	if err != nil {
		return nil, storeError(err, "job")
	}
	out := &jobMixOutput{Body: JobMix{Entrants: make([]Entrant, len(m.Entrants)), Builds: make([]BuildShare, len(m.Builds)),
		MixedVersions: make([]MixedTask, len(m.MixedVersions))}}
	for i, e := range m.Entrants {
		out.Body.Entrants[i] = entrantOf(e)
	}
	perEnv := map[string]int{}
	for i, b := range m.Builds {
		out.Body.Builds[i] = BuildShare{Environment: b.Environment, Version: b.Version, Digest: b.Digest, Attempts: b.Attempts, Scored: b.Scored, MeanReward: b.MeanReward}
		if b.Digest != "" {
			perEnv[b.Environment]++
		}
	}
	for _, n := range perEnv {
		out.Body.Mixed = out.Body.Mixed || n > 1
	}
	for i, t := range m.MixedVersions {
		mt := MixedTask{TaskID: t.TaskID, TaskName: t.TaskName, Versions: make([]VersionShare, len(t.Versions))}
		for j, v := range t.Versions {
			mt.Versions[j] = VersionShare{TaskVersionID: v.TaskVersionID, Version: v.Version, Attempts: v.Attempts, Scored: v.Scored, MeanReward: v.MeanReward}
		}
		out.Body.MixedVersions[i] = mt
	}
	out.Body.Mixed = out.Body.Mixed || len(m.MixedVersions) > 0
	return out, nil
}

func entrantOf(e rollouts.Entrant) Entrant {
	out := Entrant{ModelID: e.ModelID, ModelName: e.ModelName, Attempts: e.Attempts, Scored: e.Scored, MeanReward: e.MeanReward,
		Tasks: make([]EntrantTask, len(e.Tasks))}
	if a := e.Agent; a != nil {
		out.Agent = &AgentBuild{BuildID: a.BuildID, Name: a.Name, Version: a.Version, Digest: a.Digest}
	}
	for i, t := range e.Tasks {
		out.Tasks[i] = EntrantTask{TaskID: t.TaskID, TaskName: t.TaskName, Attempts: t.Attempts, Scored: t.Scored, MeanReward: t.MeanReward}
	}
	return out
}
