package rollouts_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/rollouts"
)

// A job's coverage, chart, thumbnails by category, entity links and cards agree with its attempts
// on both stores; other teams see none of it.
func TestJobAnalytics(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		versions, oracle := storetest.LaunchFixture(t, s, a) // taskset demo: tasks a and b
		var demo uuid.UUID
		if err := s.DB.NewSelect().Table("tasksets").Column("id").Where("name = 'demo'").Scan(ctx, &demo); err != nil {
			t.Fatal(err)
		}
		f := func(v float64) *float64 { return &v }
		runs := []struct {
			version int
			status  string
			reward  *float64
			invalid bool
			want    string
		}{
			{0, models.TraceCompleted, f(1), false, rollouts.CategorySuccessful},
			{0, models.TraceCompleted, f(0.5), false, rollouts.CategoryFailed},
			{0, models.TraceCompleted, f(1), true, rollouts.CategorySuccessful},
			{1, models.TraceError, f(0), false, rollouts.CategoryFailed},
			{1, models.TraceCancelled, nil, false, rollouts.CategoryNoScore},
			{1, models.TraceRunning, nil, false, rollouts.CategoryLive},
		}
		var lts []rollouts.LaunchTrace
		for _, r := range runs {
			lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[r.version], ModelID: oracle.ID, MaxSteps: 1})
		}
		job, _, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{Name: "j", TasksetID: &demo, MaxSteps: 1, GroupSize: 1, MaxConcurrent: 1, Traces: lts})
		if err != nil || job.Kind != models.JobSingle || job.IsRemote {
			t.Fatalf("launch = %+v, %v", job, err)
		}
		for i, r := range runs {
			if _, err := rollouts.Of(s).TransitionTrace(ctx, lts[i].TraceID, rollouts.TraceUpdate{Status: r.status, Reward: r.reward}); err != nil {
				t.Fatal(err)
			}
			if r.invalid {
				if _, err := rollouts.Of(s).SetTracesValidity(ctx, a, []uuid.UUID{lts[i].TraceID}, false); err != nil {
					t.Fatal(err)
				}
			}
		}

		cov, err := rollouts.Of(s).TasksetCoverage(ctx, a, job.ID)
		if err != nil || cov.TasksetID == nil || *cov.TasksetID != demo || cov.TasksetName != "demo" || cov.TotalTasks != 2 || cov.TasksWithTraces != 2 ||
			len(cov.Tasks) != 2 {
			t.Fatalf("coverage = %+v, %v", cov, err)
		}
		if ta := cov.Tasks[0]; ta.TaskName != "a" || ta.TraceCount != 3 || ta.InvalidatedCount != 1 || ta.AvgReward == nil || *ta.AvgReward != 0.75 ||
			len(ta.Statuses) != 1 || ta.TaskVersionID == nil || *ta.TaskVersionID != versions[0] {
			t.Errorf("task a = %+v", ta)
		}
		if tb := cov.Tasks[1]; tb.TraceCount != 3 || tb.AvgReward != nil || len(tb.Statuses) != 3 || tb.Statuses[0] != models.TraceCancelled {
			t.Errorf("task b = %+v", tb)
		}

		pts, total, err := rollouts.Of(s).ChartData(ctx, a, job.ID, 4)
		if err != nil || total != 6 || len(pts) != 4 || pts[0].ID != lts[0].TraceID || pts[2].IsValid {
			t.Errorf("chart = %d %+v, %v", total, pts, err)
		}

		thumbs, counts, err := rollouts.Of(s).Thumbnails(ctx, a, job.ID, rollouts.CategoryAll, 10, 0)
		if err != nil || len(thumbs) != 6 {
			t.Fatalf("thumbnails = %+v, %v", thumbs, err)
		}
		want := map[string]int{rollouts.CategoryAll: 6, rollouts.CategorySuccessful: 2, rollouts.CategoryFailed: 2, rollouts.CategoryNoScore: 1, rollouts.CategoryLive: 1}
		for k, n := range want {
			if counts[k] != n {
				t.Errorf("%s = %d, want %d", k, counts[k], n)
			}
		}
		for i, th := range thumbs {
			if th.Category != runs[i].want || th.TaskName == nil {
				t.Errorf("thumbnail %d = %+v, want category %s", i, th, runs[i].want)
			}
		}
		if failed, _, _ := rollouts.Of(s).Thumbnails(ctx, a, job.ID, rollouts.CategoryFailed, 1, 1); len(failed) != 1 || failed[0].ID != lts[3].TraceID {
			t.Errorf("the second failed thumbnail = %+v", failed)
		}

		links, err := rollouts.Of(s).EntityLinks(ctx, a, job.ID)
		if err != nil || len(links) != 1 || links[0].ModelName == nil || *links[0].ModelName != "Oracle" || links[0].TasksetName == nil ||
			*links[0].TasksetName != "demo" {
			t.Errorf("entity links = %+v, %v", links, err)
		}

		ids, n, tasks, err := rollouts.Of(s).TasksetJobs(ctx, a, demo, 10, 0)
		if err != nil || n != 1 || len(ids) != 1 || ids[0] != job.ID || len(tasks) != 2 || tasks[0].Name != "a" {
			t.Fatalf("taskset jobs = %v %d %+v, %v", ids, n, tasks, err)
		}
		cards, err := rollouts.Of(s).JobCards(ctx, a, []uuid.UUID{job.ID, uuid.New()})
		card := cards[job.ID]
		if err != nil || len(cards) != 1 || card == nil || card.TraceCount != 6 || card.CompletedTasks != 3 || card.FailedCount != 2 ||
			card.InvalidatedCount != 1 || card.AverageAccuracy == nil || *card.AverageAccuracy != 0.75 || len(card.Models) != 1 ||
			len(card.Chart) != 2 || card.Chart[0].TraceCount != 3 || card.Chart[1].AvgReward != nil {
			t.Errorf("card = %+v, %v", card, err)
		}

		// Another team sees nothing of the job.
		if _, err := rollouts.Of(s).TasksetCoverage(ctx, b, job.ID); err == nil {
			t.Error("another team reads the coverage")
		}
		if _, _, err := rollouts.Of(s).Thumbnails(ctx, b, job.ID, "", 10, 0); err == nil {
			t.Error("another team reads the thumbnails")
		}
		if cards, _ := rollouts.Of(s).JobCards(ctx, b, []uuid.UUID{job.ID}); len(cards) != 0 {
			t.Errorf("another team's cards = %+v", cards)
		}
		if _, _, _, err := rollouts.Of(s).TasksetJobs(ctx, b, demo, 10, 0); err == nil {
			t.Error("another team lists the private taskset's jobs")
		}

		// A task of another taskset that the job ran is listed after the taskset's, by name.
		extra, err := catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetName: "extra", Tasks: []catalog.TaskUpload{{TaskContent: models.TaskContent{Name: "z-extra", Prompt: "p"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{JobID: &job.ID, MaxSteps: 1, GroupSize: 1, MaxConcurrent: 1,
			Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: extra.TaskVersionIDs[0], ModelID: oracle.ID, MaxSteps: 1}}}); err != nil {
			t.Fatal(err)
		}
		if cov, err := rollouts.Of(s).TasksetCoverage(ctx, a, job.ID); err != nil || cov.TotalTasks != 2 || len(cov.Tasks) != 3 || cov.Tasks[2].TaskName != "z-extra" ||
			cov.Tasks[2].TraceCount != 1 || cov.Tasks[2].Statuses[0] != models.TracePending {
			t.Errorf("coverage with another taskset's task = %+v, %v", cov, err)
		}
	})
}
