package models_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
)

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
		c := storetest.Member(t, s, "alpha", "a@example.com")
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
		c := storetest.Member(t, s, "alpha", "a@example.com")
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
		c := storetest.Member(t, s, "alpha", "a@example.com")
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
		other := storetest.Member(t, s, "beta", "b@example.com")
		if err := s.RemoveMember(ctx, other.TeamID, c.MembershipID, nil); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team removed the member: %v", err)
		}
		if err := s.RemoveMember(ctx, c.TeamID, c.MembershipID, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AuthenticateSession(ctx, again); !errors.Is(err, models.ErrInvalidCredentials) {
			t.Errorf("a removed member's session authenticated: %v", err)
		}
	})
}

func TestProjects(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
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
