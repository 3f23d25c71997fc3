package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// ReplayCheck is a regression replay of an environment build against a finished job (a Proctor
// extension).
type ReplayCheck struct {
	ID           uuid.UUID                `json:"id"`
	BuildID      uuid.UUID                `json:"build_id"`
	BuildDigest  string                   `json:"build_digest" doc:"the digest of the build's image, which every replay ran"`
	AgainstJobID uuid.UUID                `json:"against_job_id" doc:"the finished job whose attempts are replayed"`
	JobID        uuid.UUID                `json:"job_id" doc:"the job that runs the replays: follow, cancel or export it as any job"`
	Status       string                   `json:"status" enum:"running,same,changed,failed" doc:"running while its job runs; same: every replay got the recorded tool results and reward; changed: some did not; failed: its job was cancelled"`
	Attempts     []models.ReplayedAttempt `json:"attempts" nullable:"false" doc:"per replayed attempt, once its job has ended, in task order: the reward before and after, the first model step (from 0, as traces number them) at which a tool result differs from the recorded one or is missing from either (null when none does), and the outcome: same, diverged (a tool result differs, the reward does not), changed_reward, or unfinished (the replay was not scored)"`
	NotReplayed  []models.NotReplayed     `json:"not_replayed" nullable:"false" doc:"the job's attempts left out, and why: not_scored, other_environment (its task runs another environment), brought_agent (a brought agent's model calls are not replayed)"`
	CreatedAt    time.Time                `json:"created_at"`
	FinishedAt   *time.Time               `json:"finished_at"`
}

func replayCheckFrom(c *models.ReplayCheck) ReplayCheck {
	return ReplayCheck{ID: c.ID, BuildID: c.BuildID, BuildDigest: c.BuildDigest, AgainstJobID: c.AgainstJobID, JobID: c.JobID, Status: c.Status,
		Attempts: nonNilSlice(c.Attempts), NotReplayed: nonNilSlice(c.NotReplayed), CreatedAt: c.CreatedAt, FinishedAt: c.FinishedAt}
}

type replayCheckOutput struct{ Body ReplayCheck }

// registerReplayCheck registers the regression replay of builds.
func (s *Server) registerReplayCheck() {
	tags := []string{"Builds"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "check-build", Method: http.MethodPost, Path: "/builds/{build_id}/check", Tags: tags,
		Summary: "Replay a finished job on a build: what does the build change? (Proctor extension)",
		Description: "Runs every scored attempt of the job whose task runs the build's environment again on that very build (pinned to its " +
			"image), with the same task version, arguments and step bound, by the replay model, which answers each model call with the answer " +
			"the attempt recorded at that step; as one job. Once the job has ended, each replay is compared with the attempt it replays: " +
			"the reward before and after, and the first step at which a tool result differs. Attempts of brought agents, of other " +
			"environments and unscored ones are listed as not replayed. 404 for a build that is not the caller's team's (as for one that does not exist); 403 when the caller's spending limit is reached; 409 for a build that did not " +
			"succeed or has no image, or a job with attempts that have not ended; 422 for a job with nothing to replay on the build's environment.",
		DefaultStatus: http.StatusAccepted,
		Errors:        []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.checkBuild)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-build-check", Method: http.MethodGet, Path: "/builds/{build_id}/check", Tags: tags,
		Summary: "A build's latest replay check (Proctor extension)", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getBuildCheck)
}

type checkBuildInput struct {
	BuildID uuid.UUID `path:"build_id"`
	Body    struct {
		AgainstJobID uuid.UUID `json:"against_job_id" doc:"a finished job of the caller's team whose attempts are replayed on the build"`
	}
}

// Resolve refuses the nil UUID as the job.
func (in *checkBuildInput) Resolve(huma.Context) []error {
	return nilIDs(map[string]*uuid.UUID{"body.against_job_id": &in.Body.AgainstJobID})
}

// checkBuild serves POST /v2/builds/{build_id}/check.
func (s *Server) checkBuild(ctx context.Context, in *checkBuildInput) (*replayCheckOutput, error) {
	if err := s.canLaunch(ctx); err != nil {
		return nil, err
	}
	chk, err := s.rollouts.StartReplayCheck(ctx, callerFrom(ctx), in.BuildID, in.Body.AgainstJobID, s.maxAttempts)
	if err != nil {
		return nil, storeError(err, "build")
	}
	if err := s.workflows.StartReplayCheck(ctx, chk.ID, chk.JobID, rollouts.ReplayConcurrency); err != nil {
		return nil, s.notStarted(ctx, "the replay check", chk.ID, err)
	}
	return &replayCheckOutput{Body: replayCheckFrom(chk)}, nil
}

// getBuildCheck serves GET /v2/builds/{build_id}/check.
func (s *Server) getBuildCheck(ctx context.Context, in *buildPath) (*replayCheckOutput, error) {
	chk, err := s.rollouts.LatestReplayCheck(ctx, callerFrom(ctx), in.BuildID)
	if err != nil {
		return nil, storeError(err, "replay check")
	}
	return &replayCheckOutput{Body: replayCheckFrom(chk)}, nil
}
