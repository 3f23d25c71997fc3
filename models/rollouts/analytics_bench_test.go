package rollouts_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

// BenchmarkJobAnalyticsPostgres measures the job analytics routes' reads on a job of 100,000
// attempts over a taskset of 200 tasks, on Postgres, among 100,000 attempts of other jobs.
// Goal (issue 13): each under 200 ms.
// Run:
//
//	go test -run '^$' -bench JobAnalyticsPostgres -benchtime 1x ./models/rollouts/
func BenchmarkJobAnalyticsPostgres(b *testing.B) {
	const traces, tasks = 100_000, 200
	for b.Loop() {
		url := storetest.PostgresURL(b)
		s := storetest.OpenURL(b, url)
		c := storetest.Member(b, s, "analytics", "a@example.com")
		up := catalog.Upload{TasksetName: "big"}
		for i := range tasks {
			up.Tasks = append(up.Tasks, catalog.TaskUpload{TaskContent: models.TaskContent{Name: fmt.Sprintf("task-%03d", i), Prompt: "p"}})
		}
		res, err := catalog.Of(s).UploadTasks(ctx, c, up)
		if err != nil {
			b.Fatal(err)
		}
		var versions []struct {
			ID     uuid.UUID `bun:"id,type:uuid"`
			TaskID uuid.UUID `bun:"task_id,type:uuid"`
		}
		if err := s.DB.NewSelect().Table("task_versions").Column("id", "task_id").Where("id IN (?)", bun.In(res.TaskVersionIDs)).Scan(ctx, &versions); err != nil {
			b.Fatal(err)
		}
		var modelIDs []uuid.UUID
		for i := range 3 {
			m := &models.LLMModel{ModelName: fmt.Sprintf("m-%d", i), Name: fmt.Sprintf("M %d", i), Provider: "openai", Adapter: models.AdapterOpenAI}
			if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
				b.Fatal(err)
			}
			modelIDs = append(modelIDs, m.ID)
		}
		var jobs []uuid.UUID
		for i := range 2 {
			job, _, err := rollouts.Of(s).LaunchJob(ctx, c, rollouts.Launch{Name: fmt.Sprint("job ", i), TasksetID: &res.TasksetID, MaxSteps: 1, GroupSize: 1,
				MaxConcurrent: 1, Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: versions[0].ID, ModelID: modelIDs[0], MaxSteps: 1}}})
			if err != nil {
				b.Fatal(err)
			}
			jobs = append(jobs, job.ID)
		}
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		cols := []string{"id", "team_id", "job_id", "task_id", "task_version_id", "model_id", "status", "reward", "is_valid", "max_steps",
			"created_at", "updated_at", "end_time"}
		statuses := []string{models.TraceCompleted, models.TraceCompleted, models.TraceCompleted, models.TraceError, models.TraceCancelled, models.TraceRunning}
		r := rand.New(rand.NewPCG(3, 4))
		start, now := time.Now(), time.Now().UTC()
		for _, job := range jobs {
			rows := make([][]any, traces)
			for i := range rows {
				v := versions[r.IntN(len(versions))]
				st := statuses[r.IntN(len(statuses))]
				var reward any
				var end any
				if st == models.TraceCompleted || st == models.TraceError {
					reward = float64(r.IntN(3)) / 2
					end = now
				}
				at := now.Add(-time.Duration(traces-i) * time.Second)
				rows[i] = []any{uuid.New(), c.TeamID, job, v.TaskID, v.ID, modelIDs[r.IntN(len(modelIDs))], st, reward, r.IntN(50) > 0, 1, at, at, end}
			}
			if _, err := conn.CopyFrom(ctx, pgx.Identifier{"traces"}, cols, pgx.CopyFromRows(rows)); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := conn.Exec(ctx, "ANALYZE traces"); err != nil {
			b.Fatal(err)
		}
		b.Logf("loaded %d attempts in %s", 2*traces, time.Since(start).Round(time.Millisecond))

		measure := func(name string, f func() error) { storetest.MedianUnder(b, 200*time.Millisecond, name, f) }
		job := jobs[0]
		measure("taskset-coverage", func() error { _, err := rollouts.Of(s).TasksetCoverage(ctx, c, job); return err })
		measure("chart-data-5000", func() error { _, _, err := rollouts.Of(s).ChartData(ctx, c, job, 5000); return err })
		measure("thumbnails-failed-page", func() error {
			_, _, err := rollouts.Of(s).Thumbnails(ctx, c, job, rollouts.CategoryFailed, 100, 5000)
			return err
		})
		measure("entity-links", func() error { _, err := rollouts.Of(s).EntityLinks(ctx, c, job); return err })
		measure("enriched-2-jobs", func() error {
			ids, _, _, err := rollouts.Of(s).TasksetJobs(ctx, c, res.TasksetID, 50, 0)
			if err != nil {
				return err
			}
			_, err = rollouts.Of(s).JobCards(ctx, c, ids)
			return err
		})
		measure("summary", func() error { _, err := rollouts.Of(s).SummarizeJob(ctx, c, job); return err })
	}
}
