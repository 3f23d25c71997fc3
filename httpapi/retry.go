package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/rollouts"
)

// registerRetry registers the retry of a job's failed attempts (a Proctor extension).
func (s *Server) registerRetry() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "retry-job", Method: http.MethodPost, Path: "/jobs/{job_id}/retry", Tags: []string{"Jobs"},
		Summary: "Run a job's failed attempts again, in the job (Proctor extension)",
		Description: "For a run_list job that has ended: each attempt that ended in error with no reward (`errors: infra`, the default: " +
			"the infrastructure failed on every try) or in any error (`errors: all`: the agent's, the model's or the environment's " +
			"failures, scored 0, too), and with either each attempt its max_cost_usd stopped (cancelled, stop_reason budget), is launched again in the same job, at most once: the new attempt names the one it replaces " +
			"(`retry_of`), which is marked invalid so that the job's results count the new one. A completed attempt is never run " +
			"again. The job reads running until the retries have ended; the retries run as the job's launcher, who (or an owner) alone may retry it (403). " +
			"409 for a job that still runs, or has attempts that have not ended, or was not launched by run_list.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.retryJob)
}

type retryJobInput struct {
	JobID uuid.UUID     `path:"job_id"`
	Body  *retryJobBody `required:"false"`
}

// retryJobBody says which failed attempts to retry, and how many at once; it may be left out.
type retryJobBody struct {
	Errors        string   `json:"errors,omitempty" enum:"infra,all" default:"infra" doc:"which failed attempts: infra (the infrastructure failed them: no host, a sandbox lost on every try; and those the job's max_cost_usd stopped) or all (any error, and those)"`
	MaxConcurrent int      `json:"max_concurrent,omitempty" minimum:"0" maximum:"10000" doc:"the retries live at once; 0 or absent: the job's own max_concurrent"`
	MaxCostUSD    *float64 `json:"max_cost_usd,omitempty" exclusiveMinimum:"0" maximum:"1000000000" doc:"a new ceiling for a job launched with max_cost_usd, set before the retries run: they are held to it (they pause the job at once if its spend is at its ceiling)"`
}

// RetriedAttempt pairs a failed attempt with the attempt that runs it again.
type RetriedAttempt struct {
	Replaced uuid.UUID `json:"replaced" doc:"the failed attempt, now invalid"`
	TraceID  uuid.UUID `json:"trace_id" doc:"the attempt that runs it again; its retry_of is replaced"`
}

// RetryJobResult says what a retry launched.
type RetryJobResult struct {
	JobID   uuid.UUID        `json:"job_id"`
	Retried []RetriedAttempt `json:"retried" nullable:"false"`
}

type retryJobOutput struct{ Body RetryJobResult }

// retryJob serves POST /v2/jobs/{job_id}/retry.
func (s *Server) retryJob(ctx context.Context, in *retryJobInput) (*retryJobOutput, error) {
	// New paid work, held to the caller's spending limits as a launch is.
	if err := s.canLaunch(ctx); err != nil {
		return nil, err
	}
	body := retryJobBody{Errors: rollouts.RetryInfra}
	if in.Body != nil {
		body = *in.Body
	}
	if body.Errors == "" {
		body.Errors = rollouts.RetryInfra
	}
	if body.MaxCostUSD != nil {
		if _, err := s.setCeiling(ctx, in.JobID, billing.CeilingChange{MaxCostUSD: body.MaxCostUSD}); err != nil {
			return nil, err
		}
	}
	res, err := s.rollouts.RetryJob(ctx, callerFrom(ctx), in.JobID, body.Errors)
	if err != nil {
		return nil, storeError(err, "job")
	}
	out := &retryJobOutput{Body: RetryJobResult{JobID: in.JobID, Retried: []RetriedAttempt{}}}
	for _, r := range res.Retried {
		out.Body.Retried = append(out.Body.Retried, RetriedAttempt{Replaced: r.Replaced, TraceID: r.By})
	}
	if len(res.Retried) == 0 {
		return out, nil
	}
	concurrent := body.MaxConcurrent
	if concurrent == 0 {
		concurrent = max(res.Job.MaxConcurrent, 1)
	}
	// Started whatever becomes of the request: a retry recorded is a retry run.
	if err := s.workflows.RetryRunList(context.WithoutCancel(ctx), in.JobID, concurrent, res.From); err != nil {
		id := requestIDFrom(ctx)
		s.log.ErrorContext(ctx, "retry run list", "request_id", id, "job", in.JobID, "error", err)
		// Nothing runs the retries: they are taken back, and the job is as it was.
		if uerr := s.rollouts.UndoRetry(context.WithoutCancel(ctx), res); uerr != nil {
			s.log.ErrorContext(ctx, "undo retry", "request_id", id, "job", in.JobID, "error", uerr)
		}
		return nil, newAPIError(http.StatusServiceUnavailable, "the retry's workflow could not start (request id "+id+"): try again")
	}
	return out, nil
}
