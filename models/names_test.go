package models_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/datafiles"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
)

// Issue 29, item 1: a name a team gives one of its resources is unique within that team only.
// Another team may use the same name (it can neither learn that the name is taken nor take it
// first to block the owner), and the owner's own duplicate is still a conflict.
func TestNamesAreUniquePerTeam(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		base := &models.LLMModel{ModelName: "base", Name: "Base", Provider: "openai", Adapter: models.AdapterOpenAI, Trainable: true}
		if err := llms.Of(s).UpsertModel(ctx, base); err != nil {
			t.Fatal(err)
		}
		quota := datafiles.DataQuota{TeamBytes: 1 << 20, FileBytes: 1 << 20, TeamFiles: 100}
		for _, tc := range []struct {
			resource string
			create   func(c *models.Caller, name string) error
		}{
			{"model fork", func(c *models.Caller, name string) error {
				_, err := llms.Of(s).ForkModel(ctx, c, base.ID, name)
				return err
			}},
			{"environment", func(c *models.Caller, name string) error {
				_, err := registry.Of(s).CreateRegistry(ctx, c, registry.NewRegistry{Name: name})
				return err
			}},
			{"taskset", func(c *models.Caller, name string) error {
				_, err := catalog.Of(s).CreateTaskset(ctx, c, name, "", false)
				return err
			}},
			{"team data file", func(c *models.Caller, name string) error {
				_, err := datafiles.Of(s).ReserveDataFile(ctx, c, datafiles.NewDataFile{Name: name, Scope: models.DataScopeTeam, DeclaredBytes: 1}, quota)
				return err
			}},
			{"project", func(c *models.Caller, name string) error {
				_, err := s.CreateProject(ctx, c.TeamID, name, "")
				return err
			}},
		} {
			t.Run(tc.resource, func(t *testing.T) {
				name := "alpha-private-" + strings.ReplaceAll(tc.resource, " ", "-")
				if err := tc.create(a, name); err != nil {
					t.Fatalf("alpha creates %s %q: %v", tc.resource, name, err)
				}
				if err := tc.create(b, name); err != nil {
					t.Errorf("beta creates a %s named as alpha's private one: %v, want it created (names are per team)", tc.resource, err)
				}
				if err := tc.create(a, name); !errors.Is(err, models.ErrConflict) {
					t.Errorf("alpha creates a second %s %q: %v, want a conflict", tc.resource, name, err)
				}
			})
		}

		// Platform models are named for everyone: a fork may not take a platform name, and the
		// refusal names the platform, never a team.
		if _, err := llms.Of(s).ForkModel(ctx, b, base.ID, "base"); !errors.Is(err, models.ErrConflict) || !strings.Contains(err.Error(), "platform") {
			t.Errorf("beta forks under a platform model's name: %v, want a conflict that names the platform", err)
		}
	})
}

// A model name resolves to the caller's team's model first, then to the platform's; never to
// another team's.
func TestModelNamesResolveToTheCallersTeamFirst(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		c := storetest.Member(t, s, "gamma", "c@example.com")
		base := &models.LLMModel{ModelName: "base", Name: "Base", Provider: "openai", Adapter: models.AdapterOpenAI, Trainable: true}
		if err := llms.Of(s).UpsertModel(ctx, base); err != nil {
			t.Fatal(err)
		}
		forkA, err := llms.Of(s).ForkModel(ctx, a, base.ID, "tuned")
		if err != nil {
			t.Fatal(err)
		}
		forkB, err := llms.Of(s).ForkModel(ctx, b, base.ID, "tuned")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := llms.Of(s).ResolveModel(ctx, c, "tuned"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("gamma resolves another team's fork: %v, want not found", err)
		}
		// The platform later seeds a model of the same name: each team keeps its own.
		platform := &models.LLMModel{ModelName: "tuned", Name: "Tuned", Provider: "openai", Adapter: models.AdapterOpenAI}
		if err := llms.Of(s).UpsertModel(ctx, platform); err != nil {
			t.Fatalf("seed a platform model named as teams' forks: %v", err)
		}
		again := &models.LLMModel{ModelName: "tuned", Name: "Tuned (renamed)", Provider: "openai", Adapter: models.AdapterOpenAI}
		if err := llms.Of(s).UpsertModel(ctx, again); err != nil {
			t.Fatalf("seeding twice: %v", err)
		}
		for _, tc := range []struct {
			who    string
			caller *models.Caller
			want   string
		}{{"alpha", a, forkA.ID.String()}, {"beta", b, forkB.ID.String()}, {"gamma", c, platform.ID.String()}} {
			got, err := llms.Of(s).ResolveModel(ctx, tc.caller, "tuned")
			if err != nil || got.ID.String() != tc.want {
				t.Errorf("%s resolves tuned = %v, %v; want %s", tc.who, got, err, tc.want)
			}
		}
		if got, _ := llms.Of(s).ResolveModel(ctx, c, "tuned"); got != nil && got.Name != "Tuned (renamed)" {
			t.Errorf("seeding the platform model again did not update it: %q", got.Name)
		}
	})
}
