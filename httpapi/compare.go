package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/compare"
	"github.com/proctorhq/proctor/models/rollouts"
)

// compareResamples is the bootstrap's number of resamples: enough that the interval's bounds
// move by well under a percent point between seeds. Past compareDraws draws in all (20,000
// paired tasks), fewer resamples are drawn, so that one comparison costs a bounded time (under
// a second on one core); the answer says how many.
const (
	compareResamples = 10_000
	compareDraws     = 200_000_000
)

// resamplesFor is the number of resamples for tasks paired tasks.
func resamplesFor(tasks int) int {
	return max(1, min(compareResamples, compareDraws/max(1, tasks)))
}

// registerCompare registers the comparison of two jobs (a Proctor extension).
func (s *Server) registerCompare() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "compare-jobs", Method: http.MethodGet, Path: "/jobs/compare", Tags: []string{"Jobs"},
		Summary: "Compare two jobs task by task (Proctor extension)",
		Description: "Pairs the completed, valid, rewarded attempts of job `a` and job `b` by task, task version and environment build " +
			"(nothing is pooled across versions or builds: what is not paired is listed with why), and gives per paired task each " +
			"job's attempts, mean reward, pass rate and traces, the difference (b − a) and whether the task flips (its pass rate " +
			"crosses one half). Over the paired tasks: each job's mean, the mean difference with a paired bootstrap 95% interval " +
			"(tasks resampled 10,000 times, fewer past 20,000 paired tasks as `ci95.resamples` says, seeded by `seed`), the exact two-sided sign test's p-value of the per-task differences " +
			"(ties dropped; chosen because per-task mean rewards are bounded, few-valued and often tied, which the sign test needs " +
			"no assumption about), and pass@k and pass^k for k up to the fewest attempts a paired task has. An attempt passes when " +
			"its reward is at least `pass_threshold`. 422 when the jobs share no task.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.compareJobs)
}

type compareInput struct {
	A             uuid.UUID `query:"a" required:"true" doc:"the baseline job"`
	B             uuid.UUID `query:"b" required:"true" doc:"the job compared with it"`
	PassThreshold float64   `query:"pass_threshold" default:"1" minimum:"0" maximum:"1000000" doc:"the reward at or above which an attempt passes"`
	Seed          uint64    `query:"seed" default:"1" doc:"seeds the bootstrap"`
}

// CompareSide is how one job did on one paired task.
type CompareSide struct {
	Attempts int         `json:"attempts"`
	Mean     float64     `json:"mean_reward"`
	PassRate float64     `json:"pass_rate"`
	TraceIDs []uuid.UUID `nullable:"false" json:"trace_ids"`
}

// ComparedTask is one paired task.
type ComparedTask struct {
	TaskID        uuid.UUID   `json:"task_id"`
	TaskName      string      `json:"task_name"`
	TaskVersionID uuid.UUID   `json:"task_version_id"`
	Digest        string      `json:"environment_digest" doc:"the environment build's digest; empty for a task without an environment"`
	A             CompareSide `json:"a"`
	B             CompareSide `json:"b"`
	Delta         float64     `json:"delta" doc:"b's mean reward minus a's"`
	Flip          string      `json:"flip" enum:"gained,lost," doc:"gained: b passes it and a did not (its pass rate crosses one half); lost: the reverse"`
}

// UnpairedTask is a task one job ran that the other did not at the same version and build.
type UnpairedTask struct {
	TaskID   uuid.UUID `json:"task_id"`
	TaskName string    `json:"task_name"`
	Job      string    `json:"job" enum:"a,b" doc:"the job that ran it"`
	Reason   string    `json:"reason" enum:"not_run,other_version,other_build" doc:"the other job did not run the task, ran another version of it, or ran it on another environment build"`
}

// KRate is pass@k or pass^k of both jobs.
type KRate struct {
	K int     `json:"k"`
	A float64 `json:"a"`
	B float64 `json:"b"`
}

// ComparedJob is one job of a comparison.
type ComparedJob struct {
	ID       uuid.UUID `json:"id"`
	Name     string    `json:"name"`
	Scored   int       `json:"scored_attempts" doc:"completed, valid attempts with a reward"`
	Unscored int       `json:"unscored_attempts" doc:"the job's other attempts (running, failed, cancelled, invalid, unrewarded), left out"`
	Mean     float64   `json:"mean_reward" doc:"over the paired tasks, of each task's mean reward"`
}

// SignTest is the sign test of the per-task differences.
type SignTest struct {
	WinsB  int     `json:"b_better" doc:"paired tasks where b's mean reward is higher"`
	WinsA  int     `json:"a_better"`
	Ties   int     `json:"ties"`
	PValue float64 `json:"p_value" doc:"exact, two-sided"`
}

// Interval is a confidence interval.
type Interval struct {
	Low       float64 `json:"low"`
	High      float64 `json:"high"`
	Resamples int     `json:"resamples"`
	Seed      uint64  `json:"seed"`
}

// JobComparison is the answer of GET /v2/jobs/compare.
type JobComparison struct {
	A              ComparedJob    `json:"a"`
	B              ComparedJob    `json:"b"`
	PairedTasks    int            `json:"paired_tasks"`
	MeanDifference float64        `json:"mean_difference" doc:"b − a, over the paired tasks"`
	CI95           Interval       `json:"ci95" doc:"paired bootstrap 95% interval of the mean difference"`
	SignTest       SignTest       `json:"sign_test"`
	PassThreshold  float64        `json:"pass_threshold"`
	PassAtK        []KRate        `nullable:"false" json:"pass_at_k"`
	PassHatK       []KRate        `nullable:"false" json:"pass_hat_k"`
	Tasks          []ComparedTask `nullable:"false" json:"tasks" doc:"by delta, largest first"`
	Flipped        int            `json:"flipped_tasks"`
	Unpaired       []UnpairedTask `nullable:"false" json:"unpaired"`
}

type compareOutput struct{ Body JobComparison }

// compareJobs serves GET /v2/jobs/compare.
func (s *Server) compareJobs(ctx context.Context, in *compareInput) (*compareOutput, error) {
	c := callerFrom(ctx)
	a, err := s.rollouts.JobAttemptsForComparison(ctx, c, in.A)
	if err != nil {
		return nil, storeErrorIn(err, "query", "job a")
	}
	b, err := s.rollouts.JobAttemptsForComparison(ctx, c, in.B)
	if err != nil {
		return nil, storeErrorIn(err, "query", "job b")
	}
	// Paired tasks are at most the smaller job's scored attempts: that bounds the resampling.
	resamples := resamplesFor(min(len(a.Scored), len(b.Scored)))
	r, err := compare.Compare(a.Scored, b.Scored, compare.Options{PassThreshold: in.PassThreshold, Resamples: resamples, Seed: in.Seed})
	if errors.Is(err, compare.ErrNoSharedTask) {
		return nil, validation("query.b", "the jobs share no task at the same task version and environment build: there is nothing to compare", in.B.String())
	}
	if err != nil {
		return nil, err
	}
	out := &compareOutput{Body: JobComparison{
		A: comparedJob(a, r.MeanA), B: comparedJob(b, r.MeanB), PairedTasks: len(r.Tasks), MeanDifference: r.MeanDifference,
		CI95:     Interval{Low: r.CILow, High: r.CIHigh, Resamples: resamples, Seed: in.Seed},
		SignTest: SignTest{WinsB: r.WinsB, WinsA: r.WinsA, Ties: r.Ties, PValue: r.PValue}, PassThreshold: in.PassThreshold,
		PassAtK: kRates(r.PassAtK), PassHatK: kRates(r.PassHatK), Tasks: make([]ComparedTask, len(r.Tasks)), Unpaired: make([]UnpairedTask, len(r.Unpaired)),
	}}
	for i, t := range r.Tasks {
		out.Body.Tasks[i] = ComparedTask{TaskID: t.TaskID, TaskName: t.TaskName, TaskVersionID: t.TaskVersionID, Digest: t.Digest,
			A: compareSide(t.A), B: compareSide(t.B), Delta: t.Delta, Flip: t.Flip}
		if t.Flip != "" {
			out.Body.Flipped++
		}
	}
	for i, u := range r.Unpaired {
		out.Body.Unpaired[i] = UnpairedTask{TaskID: u.TaskID, TaskName: u.TaskName, Job: u.Run, Reason: u.Reason}
	}
	return out, nil
}

func comparedJob(j *rollouts.JobAttempts, mean float64) ComparedJob {
	return ComparedJob{ID: j.Job.ID, Name: j.Job.Name, Scored: len(j.Scored), Unscored: j.Unscored, Mean: mean}
}

func compareSide(s compare.Side) CompareSide {
	return CompareSide{Attempts: s.Attempts, Mean: s.Mean, PassRate: s.PassRate, TraceIDs: s.TraceIDs}
}

func kRates(rs []compare.KRate) []KRate {
	out := make([]KRate, len(rs))
	for i, r := range rs {
		out[i] = KRate{K: r.K, A: r.A, B: r.B}
	}
	return out
}
