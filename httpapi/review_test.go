package httpapi

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

// reviewSetup uploads a staged taskset of two tasks and returns their ids.
func reviewSetup(t *testing.T, f *fixture) (uuid.UUID, []uuid.UUID) {
	t.Helper()
	r := f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"review","tasks":[
		{"name":"alpha","prompt":"Write a haiku","external_id":"a-1"},{"name":"beta","prompt":"Write a limerick"}]}`))
	res := decode[UploadResult](t, r)
	if err := catalog.Of(f.store).SetTasksetStages(ctx, f.caller, res.TasksetID, []string{"write", "qa"}); err != nil {
		t.Fatal(err)
	}
	page := decode[Page[TaskSummary]](t, f.do("GET", "/v2/tasksets/"+res.TasksetID.String()+"/tasks", "key", nil))
	if page.Total != 2 || page.Items[0].Name != "alpha" || page.Items[0].Version != 1 || page.Items[0].Status != "pending" {
		t.Fatalf("task list = %+v", page)
	}
	return res.TasksetID, []uuid.UUID{page.Items[0].ID, page.Items[1].ID}
}

func TestStatusAndStageRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		tasksetID, ids := reviewSetup(t, f)
		a, b := ids[0].String(), ids[1].String()
		if ts := f.do("GET", "/v2/tasksets/"+tasksetID.String(), "key", nil); !strings.Contains(string(ts.body), `"stages":["write","qa"]`) {
			t.Errorf("the taskset does not list its stages: %s", ts.body)
		}

		r := decode[MoveResult](t, f.do("PATCH", "/v2/tasks/status", "key", strings.NewReader(`{"ids":["`+a+`"],"status":"ready"}`)))
		if len(r.Failures) != 1 || r.Failures[0].Code != "stage_incomplete" || *r.Failures[0].ResolvedID != ids[0] || len(r.Succeeded) != 0 {
			t.Errorf("ready before the last stage = %+v", r)
		}
		r = decode[MoveResult](t, f.do("PATCH", "/v2/tasks/stage", "session", strings.NewReader(`{"ids":["`+a+`","`+b+`"],"stage":"qa"}`)))
		if len(r.Succeeded) != 2 {
			t.Errorf("advance = %+v", r)
		}
		body := fmt.Sprintf(`{"slugs":["a-1","beta","gamma"],"status":"ready","taskset_id":%q}`, tasksetID)
		r = decode[MoveResult](t, f.do("PATCH", "/v2/tasks/status", "key", strings.NewReader(body)))
		if len(r.Succeeded) != 2 || len(r.Failures) != 1 || r.Failures[0].Input != "gamma" || r.Failures[0].Code != "not_found" {
			t.Errorf("ready by slug = %+v", r)
		}
		r = decode[MoveResult](t, f.do("PATCH", "/v2/tasks/status", "key", strings.NewReader(`{"ids":["`+a+`"],"status":"ready"}`)))
		if len(r.Unchanged) != 1 {
			t.Errorf("same status again = %+v", r)
		}
		r = decode[MoveResult](t, f.do("PATCH", "/v2/tasks/status", "key", strings.NewReader(`{"ids":["`+a+`"],"clear":true}`)))
		if len(r.Succeeded) != 1 {
			t.Errorf("clear = %+v", r)
		}
		page := decode[Page[TaskSummary]](t, f.do("GET", "/v2/tasksets/"+tasksetID.String()+"/tasks", "key", nil))
		if page.Items[0].Status != "pending" || page.Items[0].Stage != nil || page.Items[1].Status != "ready" || *page.Items[1].Stage != "qa" {
			t.Errorf("after the moves: %+v", page.Items)
		}

		wantValidation(t, f.do("PATCH", "/v2/tasks/status", "key", strings.NewReader(`{"ids":["`+a+`"]}`)), "body.status")
		wantValidation(t, f.do("PATCH", "/v2/tasks/status", "key", strings.NewReader(`{"status":"ready"}`)), "body.ids")
		wantValidation(t, f.do("PATCH", "/v2/tasks/status", "key", strings.NewReader(`{"ids":["`+a+`"],"status":"done"}`)), "body.status")
		wantValidation(t, f.do("PATCH", "/v2/tasks/stage", "key", strings.NewReader(`{"ids":["x"],"stage":""}`)), "body.ids[0]", "body.stage")
		wantEnvelope(t, f.do("PATCH", "/v2/tasks/status", "", strings.NewReader(`{"ids":["`+a+`"],"status":"ready"}`)), 401, "unauthorized")
	})
}

func TestCommentActivityAndBriefRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		_, ids := reviewSetup(t, f)
		task := "/v2/tasks/" + ids[0].String()
		bu, bm, _ := s.AddMember(ctx, f.caller.TeamID, "Bob", "bob@example.com", models.RoleMember)
		_, bobKey, _ := s.CreateAPIKey(ctx, bm.ID, "bob")

		c := decode[Comment](t, f.do("POST", task+"/comments", "key", strings.NewReader(`{"body":"looks good @bob"}`)))
		if c.Message != "looks good @bob" || c.UserName != "Ada" || c.TaskID != ids[0] {
			t.Errorf("comment = %+v", c)
		}
		if ns, _ := catalog.Of(s).ListNotifications(ctx, bu.ID); len(ns) != 1 {
			t.Errorf("bob was not notified: %+v", ns)
		}
		// Bob reads his mention in the app (GET /v2/mentions), marks it read, and it is mailed
		// once (the mail round's store side).
		bob := "Bearer " + bobKey
		mentions := decode[struct {
			Items  []Mention
			Unread int
		}](t, f.do("GET", "/v2/mentions", bob, nil))
		if len(mentions.Items) != 1 || mentions.Unread != 1 || mentions.Items[0].TaskID != ids[0] || mentions.Items[0].ActorName != "Ada" ||
			mentions.Items[0].Comment != "looks good @bob" || mentions.Items[0].CommentID != c.ID || mentions.Items[0].ReadAt != nil {
			t.Errorf("bob's mentions = %+v", mentions)
		}
		if ada := decode[struct{ Items []Mention }](t, f.do("GET", "/v2/mentions", "key", nil)); len(ada.Items) != 0 {
			t.Errorf("Ada sees mentions of Bob: %+v", ada.Items)
		}
		if read := decode[struct {
			UpdatedCount int `json:"updated_count"`
		}](t, f.do("POST", "/v2/mentions/read", bob, strings.NewReader(`{}`))); read.UpdatedCount != 1 {
			t.Errorf("mark read = %+v", read)
		}
		if unread := decode[struct{ Items []Mention }](t, f.do("GET", "/v2/mentions?unread_only=true", bob, nil)); len(unread.Items) != 0 {
			t.Errorf("unread after reading = %+v", unread.Items)
		}
		wantValidation(t, f.do("POST", "/v2/mentions/read", bob, strings.NewReader(`{"ids":["nope"]}`)), "body.ids[0]")
		due, _ := catalog.Of(s).MentionsToMail(ctx, 10)
		if len(due) != 1 || due[0].Email != "bob@example.com" || due[0].TaskName == "" {
			t.Fatalf("mentions to mail = %+v", due)
		}
		catalog.Of(s).MentionMailed(ctx, due[0].ID)
		if again, _ := catalog.Of(s).MentionsToMail(ctx, 10); len(again) != 0 {
			t.Errorf("a mailed mention is due again: %+v", again)
		}
		wantEnvelope(t, f.do("PATCH", task+"/comments/"+c.ID.String(), "Bearer "+bobKey, strings.NewReader(`{"body":"mine now"}`)), 403, "forbidden")
		if e := decode[Comment](t, f.do("PATCH", task+"/comments/"+c.ID.String(), "key", strings.NewReader(`{"body":"edited"}`))); e.Message != "edited" {
			t.Errorf("edit = %+v", e)
		}
		wantValidation(t, f.do("POST", task+"/comments", "key", strings.NewReader(`{"body":""}`)), "body.body")
		wantEnvelope(t, f.do("POST", "/v2/tasks/"+uuid.NewString()+"/comments", "key", strings.NewReader(`{"body":"x"}`)), 404, "not_found")
		list := f.do("GET", task+"/comments", "key", nil)
		if !strings.Contains(string(list.body), `"can_comment":true`) || !strings.Contains(string(list.body), `"edited"`) {
			t.Errorf("comments = %s", list.body)
		}
		if r := f.do("DELETE", task+"/comments/"+c.ID.String(), "key", nil); r.status != 204 || len(r.body) != 0 {
			t.Errorf("delete = %d %q", r.status, r.body)
		}
		wantEnvelope(t, f.do("DELETE", task+"/comments/"+c.ID.String(), "key", nil), 404, "not_found")

		acts := f.do("GET", task+"/activity?limit=10", "key", nil)
		if !strings.Contains(string(acts.body), `"event":"version_created"`) || !strings.Contains(string(acts.body), `"by_name":"Ada"`) {
			t.Errorf("activity = %s", acts.body)
		}
		wantValidation(t, f.do("GET", task+"/activity?limit=0", "key", nil), "query.limit")
		wantValidation(t, f.do("GET", task+"/activity?limit=201", "key", nil), "query.limit")

		// Briefs are for signed-in people: an API key is refused.
		wantEnvelope(t, f.do("GET", task+"/brief", "key", nil), 401, "unauthorized")
		wantEnvelope(t, f.do("GET", task+"/brief/download", "key", nil), 401, "unauthorized")
		if b := f.do("GET", task+"/brief", "session", nil); b.status != 200 || !strings.Contains(string(b.body), `"prompt":"Write a haiku"`) || !strings.Contains(string(b.body), `"attachments":[]`) {
			t.Errorf("brief = %d %s", b.status, b.body)
		}
		dl := f.do("GET", task+"/brief/download", "session", nil)
		if dl.status != 200 || dl.header.Get("Content-Type") != "application/zip" || !strings.Contains(dl.header.Get("Content-Disposition"), "alpha-brief.zip") {
			t.Fatalf("download = %d %v", dl.status, dl.header)
		}
		zr, err := zip.NewReader(bytes.NewReader(dl.body), int64(len(dl.body)))
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]string{}
		for _, zf := range zr.File {
			rc, _ := zf.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			files[zf.Name] = string(b)
		}
		if files["prompt.md"] != "Write a haiku" || !strings.Contains(files["task.json"], `"external_id": "a-1"`) {
			t.Errorf("zip = %v", files)
		}
		wantEnvelope(t, f.do("GET", "/v2/tasks/"+uuid.NewString()+"/brief", "session", nil), 404, "not_found")
	})
}

func TestReadyCheckRoute(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		tasksetID, ids := reviewSetup(t, f)
		path := "/v2/tasks/" + ids[0].String() + "/ready-check"
		rc := decode[ReadyCheck](t, f.do("GET", path, "key", nil))
		if rc.HasRequirements || !rc.Passed || len(rc.Checks) != 0 || rc.EvaluatedTraceIDs == nil {
			t.Errorf("not configured = %+v", rc)
		}
		if err := catalog.Of(s).SetTasksetRequirements(ctx, tasksetID, &models.Requirements{MinTraces: 2}); err != nil {
			t.Fatal(err)
		}
		r := f.do("GET", path, "session", nil)
		rc = decode[ReadyCheck](t, r)
		if !rc.HasRequirements || rc.Passed || rc.K != 2 || rc.Checks[0].Key != "graded_traces" || rc.Checks[0].HowToFix == "" || rc.RequirementsVersion != 1 {
			t.Errorf("configured = %s", r.body)
		}
		// QA checks answer as checks of their own, each failing here with what to do.
		if err := catalog.Of(s).SetTasksetRequirements(ctx, tasksetID, &models.Requirements{MinTraces: 0,
			QAChecks: []models.QACheck{{Kind: models.QAReferenceSolves}, {Kind: models.QAStagePassed, Stage: "write"}}}); err != nil {
			t.Fatal(err)
		}
		r = f.do("GET", path, "key", nil)
		rc = decode[ReadyCheck](t, r)
		keys := map[string]ReadyCheckItem{}
		for _, c := range rc.Checks {
			keys[c.Key] = c
		}
		if qa, stage := keys["qa_reference_solves"], keys["qa_stage_passed"]; rc.Passed || qa.Passed || qa.HowToFix == "" || stage.Passed ||
			stage.Current != "at write" || stage.Severity != "error" || rc.RequirementsVersion != 2 {
			t.Errorf("with QA checks = %s", r.body)
		}
		wantEnvelope(t, f.do("GET", "/v2/tasks/"+uuid.NewString()+"/ready-check", "key", nil), 404, "not_found")
	})
}

// A task's versions: the task with every version, newest first, in the upload shape; another
// team sees none of it.
func TestTaskVersionsRoute(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		_, ids := reviewSetup(t, f)
		f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"review","tasks":[
			{"name":"alpha","prompt":"Write a haiku about spring","external_id":"a-1","description":"Attachment: storage://uploads/x"}]}`))
		for _, auth := range []string{"key", "session"} {
			v := decode[struct {
				ID       uuid.UUID `json:"id"`
				Name     string    `json:"name"`
				Status   string    `json:"status"`
				Versions []struct {
					ID      uuid.UUID    `json:"id"`
					Version int          `json:"version"`
					Content ExportedTask `json:"content"`
				} `json:"versions"`
				LatestVersionID *uuid.UUID `json:"latest_version_id"`
			}](t, f.do("GET", "/v2/tasks/"+ids[0].String()+"/versions", auth, nil))
			if v.ID != ids[0] || v.Name != "alpha" || v.Status != "pending" || len(v.Versions) != 2 {
				t.Fatalf("versions (%s) = %+v", auth, v)
			}
			if n, c := v.Versions[0], v.Versions[0].Content; n.Version != 2 || *v.LatestVersionID != n.ID || c.Prompt != "Write a haiku about spring" ||
				c.Description != "Attachment: storage://uploads/x" || c.ExternalID != "a-1" || v.Versions[1].Content.Prompt != "Write a haiku" {
				t.Errorf("versions (%s), newest first = %+v", auth, v.Versions)
			}
		}
		wantEnvelope(t, f.do("GET", "/v2/tasks/"+uuid.NewString()+"/versions", "key", nil), 404, "not_found")
		_, bkey := otherTeam(t, s)
		wantEnvelope(t, f.do("GET", "/v2/tasks/"+ids[0].String()+"/versions", "Bearer "+bkey, nil), 404, "not_found")
		wantValidation(t, f.do("GET", "/v2/tasks/nope/versions", "key", nil), "path.task_id")
		wantEnvelope(t, f.do("GET", "/v2/tasks/"+ids[0].String()+"/versions", "", nil), 401, "unauthorized")
	})
}
