package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
)

// Issue 29, item 1, through POST /v2/models/fork: a name another team uses privately is free to
// this team (no 409 that would reveal it), the owner's own duplicate is a 409 that names only its
// own team, and a platform model's name (public) is a 409 that says so.
func TestForkNamesAreUniquePerTeam(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		base := &models.LLMModel{ModelName: "base", Name: "Base", Provider: "openai", Adapter: models.AdapterOpenAI, Trainable: true}
		if err := llms.Of(s).UpsertModel(ctx, base); err != nil {
			t.Fatal(err)
		}
		if _, err := llms.Of(s).ForkModel(ctx, f.caller, base.ID, "alpha-secret"); err != nil {
			t.Fatal(err)
		}
		_, bkey := otherTeam(t, s)
		fork := func(auth, name string) response {
			return f.do("POST", "/v2/models/fork", auth, strings.NewReader(`{"source_model_id":"`+base.ID.String()+`","name":"`+name+`"}`))
		}
		if r := fork("Bearer "+bkey, "alpha-secret"); r.status != http.StatusOK {
			t.Errorf("beta forks under alpha's private name: %d %s, want 200", r.status, r.body)
		}
		r := fork("key", "alpha-secret")
		wantEnvelope(t, r, http.StatusConflict, "conflict")
		if !strings.Contains(string(r.body), "your team") {
			t.Errorf("alpha's duplicate: %s, want a 409 that names alpha's own model", r.body)
		}
		r = fork("Bearer "+bkey, "base")
		wantEnvelope(t, r, http.StatusConflict, "conflict")
		if !strings.Contains(string(r.body), "platform") {
			t.Errorf("a fork under a platform name: %s, want a 409 that names the platform", r.body)
		}
	})
}
