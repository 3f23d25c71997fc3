package models_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

// member creates a team with one member and returns that member as a caller.
func member(t testing.TB, s *models.Store, team, email string) *models.Caller {
	t.Helper()
	tm, err := s.CreateTeam(ctx, team)
	if err != nil {
		t.Fatal(err)
	}
	u, m, err := s.AddMember(ctx, tm.ID, "", email, models.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	return &models.Caller{TeamID: tm.ID, UserID: u.ID, MembershipID: m.ID, Role: m.Role}
}

func TestMigrationsHaveTheSameNamesOnBothDialects(t *testing.T) {
	names := func(d models.Dialect) []string {
		entries, err := fs.ReadDir(models.MigrationFiles(), "migrations/"+string(d))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	pg, lite := names(models.Postgres), names(models.SQLite)
	if strings.Join(pg, ",") != strings.Join(lite, ",") {
		t.Fatalf("postgres migrations %v differ from sqlite migrations %v", pg, lite)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		applied, err := s.Migrate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(applied) != 0 {
			t.Fatalf("second migrate applied %v, want nothing", applied)
		}
	})
}

func TestOpenRejectsUnknownURLs(t *testing.T) {
	for _, url := range []string{"mysql://u:secret@h/db", "", "sqlite:"} {
		_, err := models.Open(ctx, url)
		if err == nil {
			t.Errorf("Open(%q) succeeded, want an error", url)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error leaks the password: %v", url, err)
		}
	}
}

func TestTeamsAndMembers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a, err := s.CreateTeam(ctx, "alpha")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := s.CreateTeam(ctx, "beta")
		if _, err := s.CreateTeam(ctx, "  "); err == nil {
			t.Error("a blank team name was accepted")
		}
		got, err := s.GetTeam(ctx, a.ID)
		if err != nil || got.Name != "alpha" {
			t.Fatalf("GetTeam = %v, %v; want alpha", got, err)
		}
		if _, err := s.GetTeam(ctx, uuid.New()); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("GetTeam(unknown) error = %v, want ErrNotFound", err)
		}
		teams, err := s.ListTeams(ctx)
		if err != nil || len(teams) != 2 || teams[0].ID != a.ID {
			t.Fatalf("ListTeams = %v, %v; want alpha then beta", teams, err)
		}

		u1, m1, err := s.AddMember(ctx, a.ID, "Ada", "Ada@Example.com", models.RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		if u1.Email != "ada@example.com" {
			t.Errorf("email stored as %q, want it lower-cased", u1.Email)
		}
		// The same person joining a second team reuses the user; membership ids are integers that grow.
		u2, m2, err := s.AddMember(ctx, b.ID, "", "ada@example.com", models.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		if u2.ID != u1.ID || m2.ID <= m1.ID {
			t.Errorf("second membership: user %s (want %s), id %d (want > %d)", u2.ID, u1.ID, m2.ID, m1.ID)
		}
		if _, _, err := s.AddMember(ctx, a.ID, "", "ada@example.com", models.RoleMember); !errors.Is(err, models.ErrConflict) {
			t.Errorf("adding a member twice: %v, want ErrConflict", err)
		}
		for _, bad := range []struct{ email, role string }{{"not-an-email", models.RoleMember}, {"x@y.z", "admin"}} {
			if _, _, err := s.AddMember(ctx, a.ID, "", bad.email, bad.role); err == nil {
				t.Errorf("AddMember(%q, %q) succeeded, want an error", bad.email, bad.role)
			}
		}
		ms, users, err := s.ListMembers(ctx, a.ID)
		if err != nil || len(ms) != 1 || users[0].Name != "Ada" {
			t.Fatalf("ListMembers = %v %v, %v", ms, users, err)
		}
		if m, err := s.GetMembership(ctx, m2.ID); err != nil || m.TeamID != b.ID {
			t.Errorf("GetMembership = %v, %v", m, err)
		}
		if _, err := s.GetMembership(ctx, 999999); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("GetMembership(unknown) = %v, want ErrNotFound", err)
		}
	})
}

func TestAPIKeys(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		c := member(t, s, "alpha", "a@example.com")
		k, token, err := s.CreateAPIKey(ctx, c.MembershipID, "ci")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(token, k.Prefix+"_") || len(k.Prefix) != 11 {
			t.Errorf("token %q does not start with its visible prefix %q", token, k.Prefix)
		}
		if strings.Contains(k.SecretHash, token) || k.SecretHash == token {
			t.Error("the token is stored in clear")
		}
		got, err := s.AuthenticateAPIKey(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		want := models.Caller{TeamID: c.TeamID, UserID: c.UserID, MembershipID: c.MembershipID, Role: models.RoleOwner, Kind: models.CredentialAPIKey, APIKeyID: k.ID}
		if *got != want {
			t.Errorf("caller = %+v, want %+v", *got, want)
		}
		for _, bad := range []string{"", "pk_", "pk_short_x", token + "x", strings.Replace(token, "_", "-", 1), "Bearer " + token,
			k.Prefix + "_" + strings.Repeat("0", 64)} {
			if _, err := s.AuthenticateAPIKey(ctx, bad); !errors.Is(err, models.ErrInvalidCredentials) {
				t.Errorf("AuthenticateAPIKey(%q) = %v, want ErrInvalidCredentials", bad, err)
			}
		}
		keys, err := s.ListAPIKeys(ctx, c.TeamID)
		if err != nil || len(keys) != 1 || keys[0].Prefix != k.Prefix || keys[0].LastUsedAt == nil {
			t.Fatalf("ListAPIKeys = %+v, %v; want the key with its last use recorded", keys, err)
		}
		if err := s.RevokeAPIKey(ctx, uuid.New(), k.ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("revoking through another team: %v, want ErrNotFound", err)
		}
		if err := s.RevokeAPIKey(ctx, c.TeamID, k.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeAPIKey(ctx, c.TeamID, k.ID); err != nil {
			t.Errorf("revoking twice: %v", err)
		}
		if _, err := s.AuthenticateAPIKey(ctx, token); !errors.Is(err, models.ErrInvalidCredentials) {
			t.Errorf("a revoked key authenticated: %v", err)
		}
		if _, _, err := s.CreateAPIKey(ctx, 424242, "x"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("key for an unknown membership: %v, want ErrNotFound", err)
		}
	})
}

func TestSessions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		c := member(t, s, "alpha", "a@example.com")
		sess, token, err := s.CreateSession(ctx, c.MembershipID, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.AuthenticateSession(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != models.CredentialSession || got.SessionID != sess.ID || got.TeamID != c.TeamID {
			t.Errorf("session caller = %+v", got)
		}
		for _, bad := range []string{"", "nope", token[:len(token)-1]} {
			if _, err := s.AuthenticateSession(ctx, bad); !errors.Is(err, models.ErrInvalidCredentials) {
				t.Errorf("AuthenticateSession(%q) = %v, want ErrInvalidCredentials", bad, err)
			}
		}
		_, expired, err := s.CreateSession(ctx, c.MembershipID, nil, -time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AuthenticateSession(ctx, expired); !errors.Is(err, models.ErrInvalidCredentials) {
			t.Errorf("an expired session authenticated: %v", err)
		}
		if n, err := s.DeleteExpiredSessions(ctx); err != nil || n != 1 {
			t.Errorf("DeleteExpiredSessions = %d, %v; want 1", n, err)
		}
		if err := s.DeleteSession(ctx, sess.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AuthenticateSession(ctx, token); !errors.Is(err, models.ErrInvalidCredentials) {
			t.Errorf("a deleted session authenticated: %v", err)
		}
		if err := s.DeleteSession(ctx, sess.ID); err != nil {
			t.Errorf("deleting twice: %v", err)
		}
	})
}

func TestSessionsEndWithTheirKeyAndMembership(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		c := member(t, s, "alpha", "a@example.com")
		key, _, err := s.CreateAPIKey(ctx, c.MembershipID, "laptop")
		if err != nil {
			t.Fatal(err)
		}
		_, viaKey, err := s.CreateSession(ctx, c.MembershipID, &key.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		_, viaAdmin, err := s.CreateSession(ctx, c.MembershipID, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AuthenticateSession(ctx, viaKey); err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeAPIKey(ctx, c.TeamID, key.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AuthenticateSession(ctx, viaKey); !errors.Is(err, models.ErrInvalidCredentials) {
			t.Errorf("a session outlived the key it signed in with: %v", err)
		}
		if _, err := s.AuthenticateSession(ctx, viaAdmin); err != nil {
			t.Errorf("revoking a key ended a session made without it: %v", err)
		}

		// An administrator ends every session of a membership; removing a member ends the rest.
		if n, err := s.RevokeSessions(ctx, models.SessionSelector{MembershipID: c.MembershipID}); err != nil || n != 1 {
			t.Errorf("RevokeSessions(membership) = %d, %v; want 1", n, err)
		}
		if _, err := s.AuthenticateSession(ctx, viaAdmin); !errors.Is(err, models.ErrInvalidCredentials) {
			t.Errorf("a revoked session authenticated: %v", err)
		}
		if _, err := s.RevokeSessions(ctx, models.SessionSelector{}); err == nil {
			t.Error("RevokeSessions with no selector revoked something")
		}
		_, again, err := s.CreateSession(ctx, c.MembershipID, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		other := member(t, s, "beta", "b@example.com")
		if err := s.RemoveMember(ctx, other.TeamID, c.MembershipID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team removed the member: %v", err)
		}
		if err := s.RemoveMember(ctx, c.TeamID, c.MembershipID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AuthenticateSession(ctx, again); !errors.Is(err, models.ErrInvalidCredentials) {
			t.Errorf("a removed member's session authenticated: %v", err)
		}
	})
}

func TestProjects(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := member(t, s, "alpha", "a@example.com")
		b := member(t, s, "beta", "b@example.com")
		p, err := s.CreateProject(ctx, a.TeamID, "vision", "GUI agents")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateProject(ctx, a.TeamID, "vision", ""); !errors.Is(err, models.ErrConflict) {
			t.Errorf("duplicate project name: %v, want ErrConflict", err)
		}
		if _, err := s.CreateProject(ctx, b.TeamID, "vision", ""); err != nil {
			t.Errorf("the same name in another team: %v", err)
		}
		if _, err := s.CreateProject(ctx, a.TeamID, "", ""); err == nil {
			t.Error("a blank project name was accepted")
		}
		s.CreateProject(ctx, a.TeamID, "audio", "")
		ps, err := s.ListProjects(ctx, a.TeamID)
		if err != nil || len(ps) != 2 || ps[0].Name != "audio" {
			t.Fatalf("ListProjects = %v, %v; want audio, vision", ps, err)
		}
		if got, err := s.GetProject(ctx, a.TeamID, p.ID); err != nil || got.Description != "GUI agents" {
			t.Errorf("GetProject = %v, %v", got, err)
		}
		if _, err := s.GetProject(ctx, b.TeamID, p.ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team's project: %v, want ErrNotFound", err)
		}
	})
}

func TestBootstrapRunsOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		b, err := s.BootstrapIfEmpty(ctx, "default", "Dev", "dev@localhost")
		if err != nil || b == nil {
			t.Fatalf("first bootstrap = %v, %v", b, err)
		}
		if c, err := s.AuthenticateAPIKey(ctx, b.Token); err != nil || c.TeamID != b.Team.ID || c.Role != models.RoleOwner {
			t.Errorf("bootstrap key authenticates as %+v, %v", c, err)
		}
		again, err := s.BootstrapIfEmpty(ctx, "default", "Dev", "dev@localhost")
		if err != nil || again != nil {
			t.Errorf("second bootstrap = %v, %v; want nothing created", again, err)
		}
	})
}

func TestTasksetVisibilityAndFlags(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := member(t, s, "alpha", "a@example.com")
		b := member(t, s, "beta", "b@example.com")
		own, err := s.CreateTaskset(ctx, a, "own", "", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateTaskset(ctx, a, "own", "", false); !errors.Is(err, models.ErrConflict) {
			t.Errorf("duplicate name in a team: %v, want ErrConflict", err)
		}
		theirs, _ := s.CreateTaskset(ctx, b, "theirs-private", "", false)
		shared, _ := s.CreateTaskset(ctx, b, "theirs-shared", "", false)
		public, _ := s.CreateTaskset(ctx, b, "theirs-public", "", true)
		if err := s.ShareTaskset(ctx, shared.ID, a.TeamID, false); err != nil {
			t.Fatal(err)
		}
		if err := s.ShareTaskset(ctx, shared.ID, a.TeamID, true); err != nil { // upgrade to write access
			t.Fatal(err)
		}
		if err := s.StarTaskset(ctx, a, shared.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.StarTaskset(ctx, a, shared.ID); err != nil {
			t.Errorf("starring twice: %v", err)
		}
		addTasks(t, s, a, own.ID, 3)

		list := func(q models.TasksetQuery) map[string]models.TasksetRow {
			t.Helper()
			q.Limit = 100
			rows, total, err := s.ListTasksets(ctx, a, q)
			if err != nil {
				t.Fatal(err)
			}
			if total != len(rows) {
				t.Errorf("total %d, rows %d", total, len(rows))
			}
			out := map[string]models.TasksetRow{}
			for _, r := range rows {
				out[r.Name] = r
			}
			return out
		}
		got := list(models.TasksetQuery{})
		if len(got) != 2 || got["own"].ID != own.ID || got["theirs-shared"].ID != shared.ID {
			t.Fatalf("default list = %v, want own and theirs-shared", keys(got))
		}
		if r := got["own"]; !r.IsOwner || !r.CanEdit || r.TaskCount != 3 || r.IsStarred {
			t.Errorf("own row = %+v", r)
		}
		if r := got["theirs-shared"]; r.IsOwner || !r.CanEdit || !r.IsStarred || r.StarCount != 1 {
			t.Errorf("shared row = %+v", r)
		}
		if got := list(models.TasksetQuery{OwnerOnly: true}); len(got) != 1 || got["own"].ID != own.ID {
			t.Errorf("owner_only = %v, want own", keys(got))
		}
		// owner_only is ignored when public_only is set.
		if got := list(models.TasksetQuery{PublicOnly: true, OwnerOnly: true}); len(got) != 1 || got["theirs-public"].ID != public.ID || got["theirs-public"].CanEdit {
			t.Errorf("public_only = %v, want theirs-public, read-only", got)
		}
		if _, ok := list(models.TasksetQuery{})["theirs-private"]; ok || theirs == nil {
			t.Error("another team's private taskset is visible")
		}
	})
}

func TestTasksetSearchSortAndPaging(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := member(t, s, "alpha", "a@example.com")
		names := []string{"Bravo", "alpha", "Charlie_1", "charlie%2", "delta"}
		ids := map[string]uuid.UUID{}
		for i, n := range names {
			ts, err := s.CreateTaskset(ctx, a, n, "", false)
			if err != nil {
				t.Fatal(err)
			}
			ids[n] = ts.ID
			addTasks(t, s, a, ts.ID, i)      // task counts 0..4 in creation order
			time.Sleep(2 * time.Millisecond) // distinct updated_at
		}
		s.StarTaskset(ctx, a, ids["Bravo"])
		b := member(t, s, "beta", "b@example.com")
		s.ShareTaskset(ctx, ids["alpha"], b.TeamID, false)
		s.StarTaskset(ctx, b, ids["alpha"])
		s.StarTaskset(ctx, a, ids["alpha"])

		order := func(q models.TasksetQuery) string {
			t.Helper()
			q.Limit = 50
			rows, _, err := s.ListTasksets(ctx, a, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range rows {
				out = append(out, r.Name)
			}
			return strings.Join(out, ",")
		}
		for _, tc := range []struct {
			q    models.TasksetQuery
			want string
		}{
			{models.TasksetQuery{SortBy: models.SortName}, "alpha,Bravo,charlie%2,Charlie_1,delta"},
			{models.TasksetQuery{SortBy: models.SortDate}, "delta,charlie%2,Charlie_1,alpha,Bravo"},
			{models.TasksetQuery{SortBy: models.SortTasks}, "delta,charlie%2,Charlie_1,alpha,Bravo"},
			{models.TasksetQuery{SortBy: models.SortStars}, "alpha,Bravo," + strings.Join(sortedByID(ids, "Charlie_1", "charlie%2", "delta"), ",")},
			{models.TasksetQuery{SortBy: models.SortStarred}, "alpha,Bravo,delta,charlie%2,Charlie_1"},
			{models.TasksetQuery{SortBy: models.SortName, Search: "CHARLIE"}, "charlie%2,Charlie_1"},
			{models.TasksetQuery{SortBy: models.SortName, Search: "%"}, "charlie%2"},
			{models.TasksetQuery{SortBy: models.SortName, Search: "_"}, "Charlie_1"},
		} {
			if got := order(tc.q); got != tc.want {
				t.Errorf("%+v: got %s, want %s", tc.q, got, tc.want)
			}
		}

		// Pages of 2 cover every row exactly once, with the right total.
		seen := map[string]int{}
		for off := 0; off < 7; off += 2 {
			rows, total, err := s.ListTasksets(ctx, a, models.TasksetQuery{SortBy: models.SortStars, Limit: 2, Offset: off})
			if err != nil {
				t.Fatal(err)
			}
			if total != 5 {
				t.Errorf("total = %d, want 5", total)
			}
			for _, r := range rows {
				seen[r.Name]++
			}
		}
		if len(seen) != 5 {
			t.Errorf("paging saw %v, want each of 5 once", seen)
		}
		for n, c := range seen {
			if c != 1 {
				t.Errorf("%s seen %d times", n, c)
			}
		}
	})
}

// addTasks uploads n prompt-only tasks into a taskset.
func addTasks(t *testing.T, s *models.Store, c *models.Caller, tasksetID uuid.UUID, n int) {
	t.Helper()
	if n == 0 {
		return
	}
	up := models.Upload{TasksetID: &tasksetID}
	for i := 0; i < n; i++ {
		up.Tasks = append(up.Tasks, models.TaskUpload{TaskContent: models.TaskContent{Name: fmt.Sprintf("task-%d", i), Prompt: "do it"}})
	}
	if _, err := s.UploadTasks(ctx, c, up); err != nil {
		t.Fatal(err)
	}
}

// sortedByID orders names by their ids' text, the tie-breaker of every list.
func sortedByID(ids map[string]uuid.UUID, names ...string) []string {
	out := append([]string(nil), names...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if ids[out[j]].String() < ids[out[i]].String() {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// queryCounter counts the queries a store runs.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	q.n.Add(1)
	return ctx
}
func (q *queryCounter) AfterQuery(context.Context, *bun.QueryEvent) {}

// VisibleTaskVersions answers as GetTaskVersion would for each id, in a query per 5,000 ids and
// one per distinct taskset, whatever the number of ids.
func TestVisibleTaskVersionsInBatches(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := member(t, s, "alpha", "a@example.com")
		b := member(t, s, "beta", "b@example.com")
		own, _ := s.CreateTaskset(ctx, a, "own", "", false)
		theirs, _ := s.CreateTaskset(ctx, b, "theirs", "", false)
		addTasks(t, s, a, own.ID, 3)
		addTasks(t, s, b, theirs.ID, 2)
		versionsOf := func(c *models.Caller, tasksetID uuid.UUID) []uuid.UUID {
			rows, _, err := s.ListTasks(ctx, c, tasksetID, 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			var ids []uuid.UUID
			for _, r := range rows {
				ids = append(ids, *r.LatestVersionID)
			}
			return ids
		}
		mine, others := versionsOf(a, own.ID), versionsOf(b, theirs.ID)
		ids := append(append([]uuid.UUID{}, mine...), others...)
		for range 12000 { // ids of nothing, enough for three batches
			ids = append(ids, uuid.New())
		}
		counter := &queryCounter{}
		s.DB.AddQueryHook(counter)
		visible, err := s.VisibleTaskVersions(ctx, a, ids)
		if err != nil {
			t.Fatal(err)
		}
		if n := counter.n.Load(); n > 3+2 {
			t.Errorf("%d queries for %d ids over 2 tasksets, want at most 5 (3 batches, one per taskset)", n, len(ids))
		}
		for _, id := range ids {
			_, err := s.GetTaskVersion(ctx, a, id)
			if visible[id] != (err == nil) {
				t.Errorf("version %s: visible %v, but GetTaskVersion says %v", id, visible[id], err)
			}
		}
		if len(visible) != len(mine) {
			t.Errorf("%d visible, want the caller's %d", len(visible), len(mine))
		}
	})
}
