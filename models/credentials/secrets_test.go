package credentials_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/credentials"
	"github.com/proctorhq/proctor/models/registry"
)

// failingSealer refuses to seal one value, to break a batch half-way.
type failingSealer struct {
	credentials.Sealer
	refuse string
}

func (f failingSealer) Encrypt(pt []byte, context string) ([]byte, error) {
	if string(pt) == f.refuse {
		return nil, errors.New("refused")
	}
	return f.Sealer.Encrypt(pt, context)
}

func TestEnvVarBatchIsAtomicAndTheLaunchMergeLetsVariablesWin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		keys, err := secrets.Create(filepath.Join(t.TempDir(), "k.json"))
		if err != nil {
			t.Fatal(err)
		}
		a := storetest.Member(t, s, "alpha", "a@example.com")
		reg, err := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "env"})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := credentials.Of(s).ReplaceEnvVars(ctx, a, keys, reg.ID, []credentials.NameValue{{Name: "A", Value: "a1"}, {Name: "B", Value: "b1"}}); err != nil {
			t.Fatal(err)
		}
		// The second value cannot be sealed: nothing of the batch is kept.
		_, _, _, err = credentials.Of(s).ReplaceEnvVars(ctx, a, failingSealer{keys, "boom"}, reg.ID, []credentials.NameValue{{Name: "A", Value: "a2"}, {Name: "C", Value: "boom"}})
		if err == nil {
			t.Fatal("a batch whose value could not be sealed succeeded")
		}
		got, err := credentials.Of(s).LaunchEnv(ctx, credentials.LaunchFor{Sealer: keys, RegistryID: &reg.ID, TeamID: a.TeamID})
		if err != nil || len(got) != 2 || got["A"] != "a1" || got["B"] != "b1" {
			t.Errorf("after a failed batch the variables are %v, %v; want A=a1 B=b1", got, err)
		}
		c, u, d, err := credentials.Of(s).ReplaceEnvVars(ctx, a, keys, reg.ID, []credentials.NameValue{{Name: "A", Value: "a3"}, {Name: "C", Value: "c3"}})
		if err != nil || c != 1 || u != 1 || d != 1 {
			t.Errorf("replace = created %d updated %d deleted %d, %v; want 1 1 1", c, u, d, err)
		}
		// The launcher's unbound secrets come in under the environment's variables.
		openai := "openai"
		credentials.Of(s).SetMemberSecret(ctx, a, keys, "A", "from-member", nil)
		credentials.Of(s).SetMemberSecret(ctx, a, keys, "MINE", "mine", nil)
		credentials.Of(s).SetMemberSecret(ctx, a, keys, "OPENAI_API_KEY", "sk-bound", &openai)
		if _, err := credentials.Of(s).SetMemberSecret(ctx, a, keys, "OTHER", "sk-2", &openai); !errors.Is(err, models.ErrConflict) {
			t.Errorf("a second secret bound to openai: %v, want ErrConflict", err)
		}
		got, err = credentials.Of(s).LaunchEnv(ctx, credentials.LaunchFor{Sealer: keys, RegistryID: &reg.ID, TeamID: a.TeamID, Launcher: &a.UserID})
		if err != nil || got["A"] != "a3" || got["C"] != "c3" || got["MINE"] != "mine" || got["OPENAI_API_KEY"] != "" || len(got) != 3 {
			t.Errorf("launch env = %v, %v; want A=a3 (the variable wins) C=c3 MINE=mine, no provider key", got, err)
		}
		// Without the key, or with another, nothing opens: an error, never an empty value.
		other, _ := secrets.Create(filepath.Join(t.TempDir(), "other.json"))
		if _, err := credentials.Of(s).LaunchEnv(ctx, credentials.LaunchFor{Sealer: other, RegistryID: &reg.ID, TeamID: a.TeamID}); !errors.Is(err, secrets.ErrDecrypt) {
			t.Errorf("launch env under another key: %v, want ErrDecrypt", err)
		}
		if _, err := credentials.Of(s).LaunchEnv(ctx, credentials.LaunchFor{RegistryID: &reg.ID, TeamID: a.TeamID}); err == nil || !strings.Contains(err.Error(), "no secrets key") {
			t.Errorf("launch env without a key: %v", err)
		}
	})
}

// The variables a latest build's lock says the environment requires are checked against those
// configured: each once, sorted, the missing ones named.
func TestCheckEnvVarsReadsTheLatestBuildsLock(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		keys, err := secrets.Create(filepath.Join(t.TempDir(), "k.json"))
		if err != nil {
			t.Fatal(err)
		}
		a := storetest.Member(t, s, "alpha", "a@example.com")
		reg, _ := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "env"})
		if _, err := registry.Of(s).CreateBuild(ctx, reg.ID, registry.NewBuild{Status: registry.BuildSucceeded, SetLatest: true,
			Lock: models.BuildLock{Transport: models.TransportStdio, RequiredEnv: []string{"TOKEN", "REGION", "TOKEN"}}}); err != nil {
			t.Fatal(err)
		}
		credentials.Of(s).ReplaceEnvVars(ctx, a, keys, reg.ID, []credentials.NameValue{{Name: "REGION", Value: "eu"}})
		got, err := credentials.Of(s).CheckEnvVars(ctx, a, []uuid.UUID{reg.ID})
		if err != nil || len(got) != 1 || !slices.Equal(got[0].Required, []string{"REGION", "TOKEN"}) || !slices.Equal(got[0].Missing, []string{"TOKEN"}) {
			t.Errorf("check = %+v, %v; want REGION and TOKEN required, TOKEN missing", got, err)
		}
	})
}
