package inference_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/inference"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/llms"
)

// provider stands in for a model provider's adapter: it answers from a script.
type provider struct {
	answers []error
	calls   int
}

func (p *provider) Step(context.Context, agent.StepRequest) (*agent.StepResult, error) {
	err := p.answers[p.calls]
	p.calls++
	if err != nil {
		return nil, err
	}
	return &agent.StepResult{Message: agent.Message{Role: agent.RoleAssistant, Content: "ok"}, Done: true,
		Usage: agent.Usage{InputTokens: 100, OutputTokens: 20}, Model: "m"}, nil
}

func TestEveryCallIsRecordedWithItsTokensCostAndOutcome(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := context.Background()
		team, _ := s.CreateTeam(ctx, "t")
		u, m, _ := s.AddMember(ctx, team.ID, "", "a@example.com", models.RoleOwner)
		c := &models.Caller{TeamID: team.ID, UserID: u.ID, MembershipID: m.ID, Role: m.Role}
		model := &models.LLMModel{ModelName: "gpt-x", Name: "gpt-x", Provider: "custom", Adapter: models.AdapterOpenAI,
			InputCostPerToken: 0.001, OutputCostPerToken: 0.01}
		if err := llms.Of(s).UpsertModel(ctx, model); err != nil {
			t.Fatal(err)
		}
		p := &provider{answers: []error{nil, &agent.APIError{Provider: "openai", Status: 429, Retryable: true}, fmt.Errorf("x: %w", agent.ErrBadResponse)}}
		gw := &inference.Gateway{Store: s, Models: func(*models.LLMModel, []models.ValidationCall, string) (agent.Model, error) { return p, nil }}
		trace := uuid.New()
		client, cred, err := gw.Client(ctx, inference.Call{Model: model, TeamID: team.ID, UserID: &u.ID, TraceID: &trace, Route: billing.RouteAgent})
		if err != nil || cred != nil {
			t.Fatalf("Client = %v, %v (a custom provider gets no member key)", cred, err)
		}
		for range 3 {
			client.Step(ctx, agent.StepRequest{})
		}
		logs, total, err := billing.Of(s).ModelLogs(ctx, c, model.ID, 10, 0)
		if err != nil || total != 3 {
			t.Fatalf("logs = %d, %v", total, err)
		}
		got := map[string]models.InferenceLog{}
		for _, l := range logs {
			got[l.Status+"/"+l.ErrorCode] = l
		}
		ok := got["ok/"]
		if ok.PromptTokens != 100 || ok.CompletionTokens != 20 || ok.TotalTokens != 120 || math.Abs(ok.Cost-(100*0.001+20*0.01)) > 1e-9 || ok.TraceID == nil || *ok.TraceID != trace {
			t.Errorf("the answered call's row = %+v", ok)
		}
		if _, ok := got["error/http_429"]; !ok {
			t.Errorf("no http_429 row in %v", got)
		}
		if bad, ok := got["error/bad_response"]; !ok || bad.Cost != 0 {
			t.Errorf("no bad_response row at no cost in %v", got)
		}
		// Another team sees none of them.
		other, _ := s.CreateTeam(ctx, "o")
		ou, om, _ := s.AddMember(ctx, other.ID, "", "b@example.com", models.RoleOwner)
		if _, n, _ := billing.Of(s).ModelLogs(ctx, &models.Caller{TeamID: other.ID, UserID: ou.ID, MembershipID: om.ID}, model.ID, 10, 0); n != 0 {
			t.Errorf("another team sees %d rows", n)
		}
		if _, _, err := billing.Of(s).ModelLogs(ctx, c, uuid.New(), 10, 0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("logs of an unknown model: %v", err)
		}
	})
}
