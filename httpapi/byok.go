package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
)

// registerByokCredentials registers the provider credentials (bring-your-own-key), personal and team.
func (s *Server) registerByokCredentials() {
	tags := []string{"Provider credentials"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-byok-credentials", Method: http.MethodGet, Path: "/byok-credentials", Tags: tags, Summary: "List provider credentials",
		Description: "Your personal credentials and your team's, masked.",
	}, authKeyOrSession), s.listByok)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "set-byok-credential", Method: http.MethodPost, Path: "/byok-credentials", Tags: tags, Summary: "Set a provider credential",
		Description: "Creates, or replaces, the credential of a provider in one scope: personal (yours) or team (an owner's to set). " +
			"The answer carries the key's masked form only.",
		DefaultStatus: http.StatusCreated, Errors: []int{http.StatusForbidden, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.setByok)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "rotate-byok-credential", Method: http.MethodPatch, Path: "/byok-credentials/{credential_id}", Tags: tags,
		Summary: "Rotate a provider credential", Description: "Replaces its key; the old one is gone.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.rotateByok)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "delete-byok-credential", Method: http.MethodDelete, Path: "/byok-credentials/{credential_id}", Tags: tags,
		Summary: "Delete a provider credential", Description: "Erases its encrypted key.", DefaultStatus: http.StatusNoContent,
		Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession), s.deleteByok)
}

// ByokCredential is a provider credential as answers show it: never its key.
type ByokCredential struct {
	ID           uuid.UUID  `json:"id"`
	Provider     string     `json:"provider" enum:"openai,anthropic"`
	Scope        string     `json:"scope" enum:"personal,team"`
	Name         string     `json:"name"`
	MaskedValue  string     `json:"masked_value"`
	MembershipID *int64     `json:"membership_id" doc:"the member a personal credential belongs to; null for a team's"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	LastUsedAt   *time.Time `json:"last_used_at"`
}

func byokFromModel(b *models.ByokCredential) ByokCredential {
	return ByokCredential{ID: b.ID, Provider: b.Provider, Scope: b.Scope, Name: b.Name, MaskedValue: b.MaskedValue,
		MembershipID: b.MembershipID, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt, LastUsedAt: b.LastUsedAt}
}

type listByokOutput struct {
	Body []ByokCredential `nullable:"false"`
}

// listByok serves GET /v2/byok-credentials: the caller's and the team's credentials, masked.
func (s *Server) listByok(ctx context.Context, _ *struct{}) (*listByokOutput, error) {
	list, err := s.credentials.ListByokCredentials(ctx, callerFrom(ctx))
	if err != nil {
		return nil, err
	}
	out := &listByokOutput{Body: make([]ByokCredential, len(list))}
	for i := range list {
		out.Body[i] = byokFromModel(&list[i])
	}
	return out, nil
}

type setByokInput struct {
	Body struct {
		Provider string `json:"provider" enum:"openai,anthropic"`
		Scope    string `json:"scope,omitempty" enum:"personal,team" default:"personal"`
		Name     string `json:"name,omitempty" maxLength:"200" doc:"a label, e.g. where the key comes from"`
		APIKey   string `json:"api_key" minLength:"1" maxLength:"8192" doc:"the provider's API key; never shown again"`
	}
}

type byokOutput struct{ Body ByokCredential }

// setByok serves POST /v2/byok-credentials: create or replace a credential in one scope.
func (s *Server) setByok(ctx context.Context, in *setByokInput) (*byokOutput, error) {
	if err := s.requireSecrets(); err != nil {
		return nil, err
	}
	b, err := s.credentials.SetByokCredential(ctx, callerFrom(ctx), s.secrets, in.Body.Scope, in.Body.Provider, in.Body.Name, in.Body.APIKey)
	if err != nil {
		return nil, storeError(err, "credential")
	}
	return &byokOutput{Body: byokFromModel(b)}, nil
}

type byokPath struct {
	CredentialID uuid.UUID `path:"credential_id"`
}

type rotateByokInput struct {
	CredentialID uuid.UUID `path:"credential_id"`
	Body         struct {
		APIKey string  `json:"api_key" minLength:"1" maxLength:"8192"`
		Name   *string `json:"name,omitempty" maxLength:"200"`
	}
}

// rotateByok serves PATCH /v2/byok-credentials/{credential_id}: replace the key.
func (s *Server) rotateByok(ctx context.Context, in *rotateByokInput) (*byokOutput, error) {
	if err := s.requireSecrets(); err != nil {
		return nil, err
	}
	b, err := s.credentials.RotateByokCredential(ctx, callerFrom(ctx), s.secrets, in.CredentialID, in.Body.APIKey, in.Body.Name)
	if err != nil {
		return nil, storeError(err, "credential")
	}
	return &byokOutput{Body: byokFromModel(b)}, nil
}

// deleteByok serves DELETE /v2/byok-credentials/{credential_id}.
func (s *Server) deleteByok(ctx context.Context, in *byokPath) (*struct{}, error) {
	if err := s.credentials.DeleteByokCredential(ctx, callerFrom(ctx), in.CredentialID); err != nil {
		return nil, storeError(err, "credential")
	}
	return nil, nil
}
