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

// The categories of a job's attempts, defined once in models/rollouts (see rollouts.CategoryLive …).
const categoriesDoc = "Every attempt is in one category: `live` (not ended), `no_score` (ended without a reward: cancelled, or " +
	"failed before grading), `successful` (ended with reward ≥ 1) or `failed` (ended with a lower reward; an error scores 0); `all` is every attempt."

func (s *Server) registerAnalytics() {
	tags := []string{"Jobs"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-job-taskset-coverage", Method: http.MethodGet, Path: "/jobs/{job_id}/taskset-coverage", Tags: tags,
		Summary: "Which tasks a job covered",
		Description: "Every task of the job's taskset (and any other task it ran), by name, with its attempts in the job: how many, " +
			"their statuses, how many are invalidated, the mean reward of the valid completed ones, and the newest version run. " +
			"A published job shows its own attempts and what they reference: a caller who cannot see the taskset (anonymous, or " +
			"another team, when the taskset is private) gets only the tasks the job ran, and `total_tasks` counts those.",
		Errors: []int{http.StatusNotFound},
	}, authOptional), s.getTasksetCoverage)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-job-chart-data", Method: http.MethodGet, Path: "/jobs/{job_id}/chart-data", Tags: tags, Summary: "A job's attempts as chart points",
		Description: "The first `limit` attempts in launch order; `total` is how many the job has.", Errors: []int{http.StatusNotFound},
	}, authOptional), s.getChartData)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-job-thumbnails", Method: http.MethodGet, Path: "/jobs/{job_id}/thumbnails", Tags: tags, Summary: "A job's attempt cards by category",
		Description: categoriesDoc + " `category` (an extension) pages one category; `category_counts` counts each.",
		Errors:      []int{http.StatusNotFound},
	}, authOptional), s.getThumbnails)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-job-entity-links", Method: http.MethodGet, Path: "/jobs/{job_id}/entity-links", Tags: tags,
		Summary: "The models, environments and tasksets a job ran", Description: "One link per distinct combination.",
		Errors: []int{http.StatusNotFound},
	}, authOptional), s.getEntityLinks)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-enriched-jobs", Method: http.MethodGet, Path: "/jobs/enriched", Tags: tags, Summary: "Job cards of a taskset",
		Description: "The caller's team's jobs of the taskset, newest first, each with its figures and per-task chart (one point per task " +
			"it ran: the mean reward of its valid completed attempts), and the taskset's tasks as the chart's axis. " + categoriesDoc,
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listEnrichedJobs)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "enrich-jobs", Method: http.MethodPost, Path: "/jobs/enrich", Tags: tags, Summary: "Job cards by id",
		Description: "The cards of the listed jobs of the caller's team, by job id; ids of other jobs are left out.",
	}, authKeyOrSession), s.enrichJobs)
}

// CoverageTask is one task in a job's coverage.
type CoverageTask struct {
	TaskID           uuid.UUID  `json:"task_id"`
	TaskName         string     `json:"task_name"`
	AvgReward        *float64   `json:"avg_reward" doc:"the mean reward of its valid, completed attempts; null before any"`
	InvalidatedCount int        `json:"invalidated_count"`
	Statuses         []string   `json:"statuses" nullable:"false" doc:"the distinct statuses of its attempts"`
	TaskVersionID    *uuid.UUID `json:"task_version_id" doc:"the newest version the job ran; null when it ran none"`
	TraceCount       int        `json:"trace_count"`
}

type coverageOutput struct {
	Body struct {
		TasksetID       *uuid.UUID     `json:"taskset_id"`
		TasksetName     string         `json:"taskset_name"`
		TotalTasks      int            `json:"total_tasks" doc:"the tasks of the taskset the caller sees (only those the job ran, when it cannot see the taskset)"`
		TasksWithTraces int            `json:"tasks_with_traces"`
		Tasks           []CoverageTask `json:"tasks" nullable:"false"`
	}
}

// getTasksetCoverage serves GET /v2/jobs/{job_id}/taskset-coverage.
func (s *Server) getTasksetCoverage(ctx context.Context, in *jobPath) (*coverageOutput, error) {
	cov, err := s.rollouts.TasksetCoverage(ctx, callerFrom(ctx), in.JobID)
	if err != nil {
		return nil, storeError(err, "job")
	}
	out := &coverageOutput{}
	b := &out.Body
	b.TasksetID, b.TasksetName, b.TotalTasks, b.TasksWithTraces = cov.TasksetID, cov.TasksetName, cov.TotalTasks, cov.TasksWithTraces
	b.Tasks = make([]CoverageTask, len(cov.Tasks))
	for i, t := range cov.Tasks {
		b.Tasks[i] = CoverageTask{TaskID: t.TaskID, TaskName: t.TaskName, AvgReward: t.AvgReward, InvalidatedCount: t.InvalidatedCount,
			Statuses: t.Statuses, TaskVersionID: t.TaskVersionID, TraceCount: t.TraceCount}
	}
	return out, nil
}

// ChartPoint is one attempt on a job's chart.
type ChartPoint struct {
	ID            uuid.UUID  `json:"id"`
	Status        string     `json:"status"`
	CreatedAt     time.Time  `json:"created_at"`
	EndTime       *time.Time `json:"end_time"`
	IsValid       bool       `json:"is_valid"`
	Reward        *float64   `json:"reward"`
	TaskVersionID *uuid.UUID `json:"task_version_id"`
}

type chartDataInput struct {
	JobID uuid.UUID `path:"job_id"`
	Limit int       `query:"limit" minimum:"1" maximum:"100000" default:"5000"`
}

type chartDataOutput struct {
	Body struct {
		DataPoints []ChartPoint `json:"data_points" nullable:"false"`
		Total      int          `json:"total"`
	}
}

// getChartData serves GET /v2/jobs/{job_id}/chart-data.
func (s *Server) getChartData(ctx context.Context, in *chartDataInput) (*chartDataOutput, error) {
	pts, total, err := s.rollouts.ChartData(ctx, callerFrom(ctx), in.JobID, in.Limit)
	if err != nil {
		return nil, storeError(err, "job")
	}
	out := &chartDataOutput{}
	out.Body.Total = total
	out.Body.DataPoints = make([]ChartPoint, len(pts))
	for i, p := range pts {
		out.Body.DataPoints[i] = ChartPoint(p)
	}
	return out, nil
}

// Thumbnail is an attempt's card: its trace row (spec: Thumbnail rows) with its job's name, the
// comments on its task, its task's name and its category.
type Thumbnail struct {
	Trace
	JobName      string  `json:"job_name"`
	CommentCount int     `json:"comment_count" doc:"comments on its task that the caller may read (none on a task of a taskset it cannot see)"`
	TaskName     *string `json:"task_name"`
	Category     string  `json:"category" enum:"failed,live,no_score,successful"`
}

// CategoryCounts counts a job's attempts by category.
type CategoryCounts struct {
	All        int `json:"all"`
	Failed     int `json:"failed"`
	Live       int `json:"live"`
	NoScore    int `json:"no_score"`
	Successful int `json:"successful"`
}

type thumbnailsInput struct {
	JobID    uuid.UUID `path:"job_id"`
	Limit    int       `query:"limit" minimum:"1" maximum:"500" default:"100"`
	Offset   int       `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
	Category string    `query:"category" enum:"all,failed,live,no_score,successful" default:"all" doc:"Extension: only this category"`
}

type thumbnailsOutput struct {
	Body struct {
		Thumbnails     []Thumbnail    `json:"thumbnails" nullable:"false"`
		CategoryCounts CategoryCounts `json:"category_counts"`
		HasMore        bool           `json:"has_more"`
		NextOffset     *int           `json:"next_offset" doc:"the offset of the next page; null on the last"`
	}
}

// getThumbnails serves GET /v2/jobs/{job_id}/thumbnails.
func (s *Server) getThumbnails(ctx context.Context, in *thumbnailsInput) (*thumbnailsOutput, error) {
	rows, counts, err := s.rollouts.Thumbnails(ctx, callerFrom(ctx), in.JobID, in.Category, in.Limit, in.Offset)
	if err != nil {
		return nil, storeError(err, "job")
	}
	out := &thumbnailsOutput{}
	b := &out.Body
	b.CategoryCounts = CategoryCounts{All: counts[rollouts.CategoryAll], Failed: counts[rollouts.CategoryFailed], Live: counts[rollouts.CategoryLive],
		NoScore: counts[rollouts.CategoryNoScore], Successful: counts[rollouts.CategorySuccessful]}
	b.Thumbnails = make([]Thumbnail, len(rows))
	for i, r := range rows {
		b.Thumbnails[i] = Thumbnail{Trace: traceFrom(&r.TraceRow), JobName: r.JobName, CommentCount: r.CommentCount, TaskName: r.TaskName, Category: r.Category}
	}
	if next := in.Offset + len(rows); next < counts[in.Category] {
		b.HasMore, b.NextOffset = true, &next
	}
	return out, nil
}

// Named is a row's id and name.
type Named struct {
	ID   *uuid.UUID `json:"id"`
	Name *string    `json:"name"`
}

// EntityLink is one combination of model, environment and taskset.
type EntityLink struct {
	Model    Named `json:"model"`
	Registry Named `json:"registry"`
	Taskset  Named `json:"taskset"`
}

type entityLinksOutput struct {
	Body struct {
		Links []EntityLink `json:"links" nullable:"false"`
	}
}

// getEntityLinks serves GET /v2/jobs/{job_id}/entity-links.
func (s *Server) getEntityLinks(ctx context.Context, in *jobPath) (*entityLinksOutput, error) {
	ls, err := s.rollouts.EntityLinks(ctx, callerFrom(ctx), in.JobID)
	if err != nil {
		return nil, storeError(err, "job")
	}
	out := &entityLinksOutput{}
	out.Body.Links = make([]EntityLink, len(ls))
	for i, l := range ls {
		out.Body.Links[i] = EntityLink{Model: Named{l.ModelID, l.ModelName}, Registry: Named{l.RegistryID, l.RegistryName}, Taskset: Named{l.TasksetID, l.TasksetName}}
	}
	return out, nil
}

// TaskRef is a task's id and name.
type TaskRef struct {
	ID   uuid.UUID `json:"id"`
	Name string    `json:"name"`
}

// TaskPoint is one task on a job card's chart.
type TaskPoint struct {
	TaskID     uuid.UUID `json:"task_id"`
	AvgReward  *float64  `json:"avg_reward" doc:"of its valid, completed attempts; null before any"`
	TraceCount int       `json:"trace_count"`
}

// JobCard is a job with its figures.
type JobCard struct {
	ID               uuid.UUID          `json:"id"`
	Name             string             `json:"name"`
	Status           string             `json:"status"`
	CreatedAt        time.Time          `json:"created_at"`
	AverageAccuracy  *float64           `json:"average_accuracy" doc:"the mean reward of its valid, completed attempts; null before any"`
	ChartData        []TaskPoint        `json:"chart_data" nullable:"false" doc:"one point per task it ran"`
	CompletedTasks   int                `json:"completed_tasks" doc:"its completed attempts"`
	FailedCount      int                `json:"failed_count" doc:"its attempts in the failed category"`
	InvalidatedCount int                `json:"invalidated_count"`
	TraceCount       int                `json:"trace_count"`
	JobType          string             `json:"job_type" enum:"single,remote,batch" doc:"how it was launched: run, submit or run_list"`
	Metadata         models.JobMetadata `json:"metadata"`
	Models           []TaskRef          `json:"models" nullable:"false"`
}

func jobCard(c *rollouts.JobCard) JobCard {
	out := JobCard{ID: c.Job.ID, Name: c.Job.Name, Status: c.Job.Status, CreatedAt: c.Job.CreatedAt, AverageAccuracy: c.AverageAccuracy,
		CompletedTasks: c.CompletedTasks, FailedCount: c.FailedCount, InvalidatedCount: c.InvalidatedCount, TraceCount: c.TraceCount,
		JobType: c.Job.Kind, Metadata: c.Job.Metadata.Listed(), ChartData: make([]TaskPoint, len(c.Chart)), Models: make([]TaskRef, len(c.Models))}
	for i, p := range c.Chart {
		out.ChartData[i] = TaskPoint{TaskID: p.TaskID, AvgReward: p.AvgReward, TraceCount: p.TraceCount}
	}
	for i, m := range c.Models {
		out.Models[i] = TaskRef{ID: m.ID, Name: m.Name}
	}
	return out
}

type enrichedInput struct {
	TasksetID uuid.UUID `query:"taskset_id" required:"true"`
	Limit     int       `query:"limit" minimum:"1" maximum:"200" default:"50"`
	Offset    int       `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
}

type enrichedOutput struct {
	Body struct {
		Jobs         []JobCard `json:"jobs" nullable:"false"`
		TotalCount   int       `json:"total_count"`
		TasksetTasks []TaskRef `json:"taskset_tasks" nullable:"false"`
	}
}

// listEnrichedJobs serves GET /v2/jobs/enriched.
func (s *Server) listEnrichedJobs(ctx context.Context, in *enrichedInput) (*enrichedOutput, error) {
	c := callerFrom(ctx)
	ids, total, tasks, err := s.rollouts.TasksetJobs(ctx, c, in.TasksetID, in.Limit, in.Offset)
	if err != nil {
		return nil, storeError(err, "taskset")
	}
	cards, err := s.rollouts.JobCards(ctx, c, ids)
	if err != nil {
		return nil, err
	}
	out := &enrichedOutput{}
	b := &out.Body
	b.TotalCount, b.Jobs, b.TasksetTasks = total, make([]JobCard, 0, len(ids)), make([]TaskRef, len(tasks))
	for _, id := range ids {
		if card := cards[id]; card != nil {
			b.Jobs = append(b.Jobs, jobCard(card))
		}
	}
	for i, t := range tasks {
		b.TasksetTasks[i] = TaskRef{ID: t.ID, Name: t.Name}
	}
	return out, nil
}

type enrichInput struct {
	Body []uuid.UUID `maxItems:"200"`
}

type enrichOutput struct {
	Body struct {
		Enrichments map[string]JobCard `json:"enrichments" doc:"job cards by job id"`
	}
}

// enrichJobs serves POST /v2/jobs/enrich.
func (s *Server) enrichJobs(ctx context.Context, in *enrichInput) (*enrichOutput, error) {
	cards, err := s.rollouts.JobCards(ctx, callerFrom(ctx), in.Body)
	if err != nil {
		return nil, err
	}
	out := &enrichOutput{}
	out.Body.Enrichments = make(map[string]JobCard, len(cards))
	for id, card := range cards {
		out.Body.Enrichments[id.String()] = jobCard(card)
	}
	return out, nil
}
