package catalog_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

// reviewFixture is a team of two with a staged taskset of three tasks and an unstaged one of one.
type reviewFixture struct {
	ada, bob        *models.Caller
	staged, flat    uuid.UUID
	tasks           []uuid.UUID // staged: t0, t1, t2
	flatTask        uuid.UUID
	firstVersionOf0 uuid.UUID
}

func newReviewFixture(t *testing.T, s *models.Store) reviewFixture {
	t.Helper()
	ada := storetest.Member(t, s, "alpha", "ada@example.com")
	bu, bm, err := s.AddMember(ctx, ada.TeamID, "Bob", "bob@example.com", models.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	bob := &models.Caller{TeamID: ada.TeamID, UserID: bu.ID, MembershipID: bm.ID, Role: bm.Role}
	up := func(name string, n int) (*catalog.UploadResult, []uuid.UUID) {
		u := catalog.Upload{TasksetName: name}
		for i := 0; i < n; i++ {
			u.Tasks = append(u.Tasks, catalog.TaskUpload{TaskContent: models.TaskContent{Name: "t" + string(rune('0'+i)), Prompt: "p"}})
		}
		res, err := catalog.Of(s).UploadTasks(ctx, ada, u)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uuid.UUID
		for _, v := range res.TaskVersionIDs {
			tv, err := catalog.Of(s).GetTaskVersion(ctx, ada, v)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, tv.TaskID)
		}
		return res, ids
	}
	staged, ids := up("staged", 3)
	flat, flatIDs := up("flat", 1)
	if err := catalog.Of(s).SetTasksetStages(ctx, ada, staged.TasksetID, []string{"write", "qa", "polish"}); err != nil {
		t.Fatal(err)
	}
	return reviewFixture{ada: ada, bob: bob, staged: staged.TasksetID, flat: flat.TasksetID, tasks: ids, flatTask: flatIDs[0], firstVersionOf0: staged.TaskVersionIDs[0]}
}

func outcome(r *catalog.MoveResult) string {
	var b strings.Builder
	b.WriteString("ok:")
	for range r.Succeeded {
		b.WriteString("+")
	}
	b.WriteString(" same:")
	for range r.Unchanged {
		b.WriteString("=")
	}
	b.WriteString(" fail:")
	for _, f := range r.Failures {
		b.WriteString(f.Code + ",")
	}
	return b.String()
}

func TestStatusAndStageMoves(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newReviewFixture(t, s)
		t0, t1, t2 := f.tasks[0].String(), f.tasks[1].String(), f.tasks[2].String()
		other := storetest.Member(t, s, "beta", "x@example.com")
		pub, _ := catalog.Of(s).CreateTaskset(ctx, other, "public", "", true)
		catalog.Of(s).UploadTasks(ctx, other, catalog.Upload{TasksetID: &pub.ID, Tasks: []catalog.TaskUpload{{TaskContent: models.TaskContent{Name: "p", Prompt: "p"}}}})
		pubTask, _ := catalog.Of(s).ExportTaskset(ctx, other, &catalog.TasksetRow{Taskset: models.Taskset{ID: pub.ID}})

		steps := []struct {
			name string
			do   func() (*catalog.MoveResult, error)
			want string
		}{
			{"ready needs the last stage", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).SetTaskStatus(ctx, f.ada, []string{t0}, nil, catalog.TaskReady, false)
			}, "ok: same: fail:stage_incomplete,"},
			{"advance one stage", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).MoveTaskStage(ctx, f.ada, []string{t0, t1}, "qa")
			}, "ok:++ same: fail:"},
			{"skipping a stage fails, staying put is unchanged", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).MoveTaskStage(ctx, f.ada, []string{t2, t0, "nope", uuid.NewString()}, "qa")
			}, "ok:+ same:= fail:taskset_required,not_found,"},
			{"skip", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).MoveTaskStage(ctx, f.bob, []string{t0}, "write")
			}, "ok:+ same: fail:"},
			{"unknown stage", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).MoveTaskStage(ctx, f.ada, []string{t0}, "ship")
			}, "ok: same: fail:unknown_stage,"},
			{"no stages", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).MoveTaskStage(ctx, f.ada, []string{f.flatTask.String()}, "qa")
			}, "ok: same: fail:no_stages,"},
			{"jump ahead", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).MoveTaskStage(ctx, f.ada, []string{t0}, "polish")
			}, "ok: same: fail:stage_skip,"},
			{"through the stages", func() (*catalog.MoveResult, error) {
				if _, err := catalog.Of(s).MoveTaskStage(ctx, f.ada, []string{t1}, "polish"); err != nil {
					return nil, err
				}
				return catalog.Of(s).SetTaskStatus(ctx, f.ada, []string{t1}, nil, catalog.TaskReady, false)
			}, "ok:+ same: fail:"},
			{"again is unchanged; by slug; by version id", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).SetTaskStatus(ctx, f.ada, []string{"t1", f.firstVersionOf0.String()}, &f.staged, catalog.TaskRevision, false)
			}, "ok:++ same: fail:"},
			{"slugs need a taskset", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).SetTaskStatus(ctx, f.ada, []string{"t1"}, nil, catalog.TaskRevision, false)
			}, "ok: same: fail:taskset_required,"},
			{"no stages: ready at once", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).SetTaskStatus(ctx, f.ada, []string{f.flatTask.String()}, nil, catalog.TaskReady, false)
			}, "ok:+ same: fail:"},
			{"a moved task is not pending", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).MoveTaskStage(ctx, f.ada, []string{t1}, "qa")
			}, "ok: same: fail:not_pending,"},
			{"clear resets the status and the stage", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).SetTaskStatus(ctx, f.ada, []string{t1, t2}, nil, "", true)
			}, "ok:++ same: fail:"},
			{"clearing a cleared task is unchanged", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).SetTaskStatus(ctx, f.ada, []string{t2}, nil, "", true)
			}, "ok: same:= fail:"},
			{"a public taskset is read-only to others; an invisible one is absent", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).SetTaskStatus(ctx, f.ada, []string{pubTask[0].TaskID.String()}, nil, catalog.TaskVerified, false)
			}, "ok: same: fail:forbidden,"},
			{"another team's private task", func() (*catalog.MoveResult, error) {
				return catalog.Of(s).SetTaskStatus(ctx, other, []string{t0}, nil, catalog.TaskVerified, false)
			}, "ok: same: fail:not_found,"},
		}
		for _, st := range steps {
			r, err := st.do()
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if got := outcome(r); got != st.want {
				t.Errorf("%s: %s, want %s (%+v)", st.name, got, st.want, r.Failures)
			}
		}
		got, _ := catalog.Of(s).GetTask(ctx, f.ada, f.tasks[1])
		if got.Task.Status != catalog.TaskPending || got.Task.Stage != nil {
			t.Errorf("after clear: %s at %v, want pending with no stage", got.Task.Status, got.Task.Stage)
		}
		if _, err := catalog.Of(s).SetTaskStatus(ctx, f.ada, []string{t0}, nil, "done", false); err == nil {
			t.Error("an unknown status was accepted")
		}

		// A slug in another team's private taskset fails exactly as one that does not exist:
		// the failure echoes the input and nothing it resolved to.
		exists, _ := catalog.Of(s).SetTaskStatus(ctx, other, []string{"t1"}, &f.staged, catalog.TaskReady, false)
		absent, _ := catalog.Of(s).SetTaskStatus(ctx, other, []string{"no-such-task"}, &f.staged, catalog.TaskReady, false)
		if len(exists.Failures) != 1 || len(absent.Failures) != 1 {
			t.Fatalf("failures: %+v / %+v", exists.Failures, absent.Failures)
		}
		e, a := exists.Failures[0], absent.Failures[0]
		if e.Input != "t1" || e.ResolvedID != nil || e.Code != a.Code || e.Reason != a.Reason {
			t.Errorf("a private slug fails as %+v, an absent one as %+v: want the same, echoing only the input", e, a)
		}
	})
}

func TestCommentsMentionsAndActivity(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newReviewFixture(t, s)
		task := f.tasks[0]
		c1, err := catalog.Of(s).AddComment(ctx, f.ada, task, "@bob please check, cc @ada and @nobody")
		if err != nil {
			t.Fatal(err)
		}
		if c1.UserName != "ada@example.com" && c1.UserName == "" {
			t.Errorf("comment author name = %q", c1.UserName)
		}
		ns, _ := catalog.Of(s).ListNotifications(ctx, f.bob.UserID)
		if len(ns) != 1 || ns[0].Kind != "mention" || *ns[0].CommentID != c1.ID || *ns[0].ActorID != f.ada.UserID {
			t.Errorf("bob's notifications = %+v, want the mention", ns)
		}
		if mine, _ := catalog.Of(s).ListNotifications(ctx, f.ada.UserID); len(mine) != 0 {
			t.Errorf("mentioning oneself notified: %+v", mine)
		}
		c2, err := catalog.Of(s).AddComment(ctx, f.bob, task, "done, bob@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := catalog.Of(s).UpdateComment(ctx, f.bob, task, c1.ID, "hijack"); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("editing another's comment: %v, want forbidden", err)
		}
		if up, err := catalog.Of(s).UpdateComment(ctx, f.ada, task, c1.ID, "edited"); err != nil || up.Message != "edited" {
			t.Errorf("editing one's own comment: %+v, %v", up, err)
		}
		if err := catalog.Of(s).DeleteComment(ctx, f.ada, task, c2.ID); err == nil {
			t.Error("deleting another's comment succeeded")
		}
		if err := catalog.Of(s).DeleteComment(ctx, f.bob, task, c2.ID); err != nil {
			t.Fatal(err)
		}
		if err := catalog.Of(s).DeleteComment(ctx, f.bob, task, c2.ID); err == nil {
			t.Error("deleting twice succeeded")
		}
		list, can, _, err := catalog.Of(s).ListComments(ctx, f.ada, task)
		if err != nil || len(list) != 1 || !can {
			t.Errorf("comments = %+v can=%v, %v", list, can, err)
		}
		// A reader of a public taskset may read but not comment.
		s.DB.NewUpdate().Model((*models.Taskset)(nil)).Set("public = ?", true).Where("id = ?", f.staged).Exec(ctx)
		outsider := storetest.Member(t, s, "gamma", "g@example.com")
		if _, can, reason, err := catalog.Of(s).ListComments(ctx, outsider, task); err != nil || can || reason == "" {
			t.Errorf("outsider: can=%v reason=%q err=%v", can, reason, err)
		}
		if _, err := catalog.Of(s).AddComment(ctx, outsider, task, "hi"); err == nil {
			t.Error("an outsider commented on a public task")
		}

		catalog.Of(s).MoveTaskStage(ctx, f.ada, []string{task.String()}, "qa")
		catalog.Of(s).UploadTasks(ctx, f.ada, catalog.Upload{TasksetID: &f.staged, Tasks: []catalog.TaskUpload{{TaskContent: models.TaskContent{Name: "t0", Prompt: "p2"}}}})
		acts, err := catalog.Of(s).TaskActivity(ctx, f.ada, task, 50)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, a := range acts {
			kinds = append(kinds, a.Event)
		}
		want := []string{catalog.ActivityVersion, catalog.EventStageChanged, catalog.ActivityComment, catalog.ActivityVersion}
		if strings.Join(kinds, ",") != strings.Join(want, ",") {
			t.Errorf("activity = %v, want %v (newest first)", kinds, want)
		}
		if acts[0].Version != 2 || acts[1].Summary != "stage write → qa" || acts[1].ByRole != models.RoleOwner || acts[1].ByName == "" {
			t.Errorf("activity details = %+v", acts[:2])
		}
		if few, _ := catalog.Of(s).TaskActivity(ctx, f.ada, task, 2); len(few) != 2 {
			t.Errorf("limit 2 gave %d events", len(few))
		}
	})
}
