package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
)

// registerMemberSecrets registers the caller's own secrets.
func (s *Server) registerMemberSecrets() {
	tags := []string{"Member secrets"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-member-secrets", Method: http.MethodGet, Path: "/member-secrets", Tags: tags, Summary: "List your secrets",
		Description: "The caller's own secrets, masked; no other member sees them.",
	}, authKeyOrSession), s.listMemberSecrets)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "set-member-secret", Method: http.MethodPost, Path: "/member-secrets", Tags: tags, Summary: "Set a secret",
		Description: "Creates the secret, or updates the one of that name. A secret bound to a provider is your key for it " +
			"(one per provider) and is never passed to environments; an unbound one is passed to the sandboxes of the attempts you " +
			"launch, unless the environment has a variable of that name.",
		DefaultStatus: http.StatusCreated, Errors: []int{http.StatusConflict, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.setMemberSecret)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "update-member-secret", Method: http.MethodPatch, Path: "/member-secrets/{secret_id}", Tags: tags, Summary: "Change a secret",
		Description: "Its value, its provider binding (null unbinds), or both.", Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.updateMemberSecret)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "delete-member-secret", Method: http.MethodDelete, Path: "/member-secrets/{secret_id}", Tags: tags, Summary: "Delete a secret",
		DefaultStatus: http.StatusNoContent, Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.deleteMemberSecret)
}

// MemberSecret is a member's secret as answers show it.
type MemberSecret struct {
	ID          uuid.UUID `json:"id"`
	Name        string    `json:"name"`
	MaskedValue string    `json:"masked_value"`
	Value       *string   `json:"value,omitempty" doc:"only in the answer to the request that set it"`
	Provider    *string   `json:"provider" doc:"the model provider the secret is the member's key for; null when unbound"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func memberSecretFromModel(m *models.MemberSecret, value *string) MemberSecret {
	return MemberSecret{ID: m.ID, Name: m.Name, MaskedValue: m.MaskedValue, Value: value, Provider: m.Provider, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}

type listMemberSecretsOutput struct {
	Body struct {
		Secrets []MemberSecret `json:"secrets" nullable:"false"`
	}
}

// listMemberSecrets serves GET /v2/member-secrets: the caller's secrets, masked.
func (s *Server) listMemberSecrets(ctx context.Context, _ *struct{}) (*listMemberSecretsOutput, error) {
	list, err := s.credentials.ListMemberSecrets(ctx, callerFrom(ctx))
	if err != nil {
		return nil, err
	}
	out := &listMemberSecretsOutput{}
	out.Body.Secrets = make([]MemberSecret, len(list))
	for i := range list {
		out.Body.Secrets[i] = memberSecretFromModel(&list[i], nil)
	}
	return out, nil
}

type setMemberSecretInput struct {
	Body struct {
		Name     string  `json:"name" minLength:"1" maxLength:"128" pattern:"^[A-Za-z_][A-Za-z0-9_]*$"`
		Value    string  `json:"value" maxLength:"65536"`
		Provider *string `json:"provider,omitempty" enum:"openai,anthropic" doc:"bind the secret to this model provider: it becomes your key for it"`
	}
}

type memberSecretOutput struct{ Body MemberSecret }

// setMemberSecret serves POST /v2/member-secrets: create or update the caller's secret by name.
func (s *Server) setMemberSecret(ctx context.Context, in *setMemberSecretInput) (*memberSecretOutput, error) {
	if err := s.requireSecrets(); err != nil {
		return nil, err
	}
	m, err := s.credentials.SetMemberSecret(ctx, callerFrom(ctx), s.secrets, in.Body.Name, in.Body.Value, in.Body.Provider)
	if err != nil {
		return nil, storeError(err, "secret")
	}
	return &memberSecretOutput{Body: memberSecretFromModel(m, &in.Body.Value)}, nil
}

type memberSecretPath struct {
	SecretID uuid.UUID `path:"secret_id"`
}

type updateMemberSecretInput struct {
	SecretID uuid.UUID `path:"secret_id"`
	Body     struct {
		Value *string `json:"value,omitempty" maxLength:"65536"`
		// Provider is present (a provider, or null to unbind) only when the binding changes.
		Provider providerBinding `json:"provider,omitempty" doc:"openai or anthropic binds; null unbinds; absent leaves the binding"`
	}
}

// Resolve checks the provider binding asked for.
func (in *updateMemberSecretInput) Resolve(huma.Context) []error {
	p := in.Body.Provider
	if p.Sent && !p.Null && p.Value != "openai" && p.Value != "anthropic" {
		return []error{&huma.ErrorDetail{Location: "body.provider", Message: "openai, anthropic or null", Value: p.Value}}
	}
	if in.Body.Value == nil && !p.Sent {
		return []error{&huma.ErrorDetail{Location: "body", Message: "give value, provider, or both"}}
	}
	return nil
}

// providerBinding is a field that may be absent (leave the binding), null (unbind) or a provider.
type providerBinding struct {
	Sent  bool
	Null  bool
	Value string
}

// UnmarshalJSON records whether the field was sent, and whether as null.
func (p *providerBinding) UnmarshalJSON(b []byte) error {
	p.Sent = true
	if string(b) == "null" {
		p.Null = true
		return nil
	}
	return json.Unmarshal(b, &p.Value)
}

// Schema is a nullable string.
func (providerBinding) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeString, Nullable: true}
}

// updateMemberSecret serves PATCH /v2/member-secrets/{secret_id}.
func (s *Server) updateMemberSecret(ctx context.Context, in *updateMemberSecretInput) (*memberSecretOutput, error) {
	if err := s.requireSecrets(); err != nil {
		return nil, err
	}
	var provider *string
	if p := in.Body.Provider; p.Sent && !p.Null {
		provider = &p.Value
	}
	m, err := s.credentials.UpdateMemberSecret(ctx, callerFrom(ctx), s.secrets, in.SecretID, in.Body.Value, in.Body.Provider.Sent, provider)
	if err != nil {
		return nil, storeError(err, "secret")
	}
	return &memberSecretOutput{Body: memberSecretFromModel(m, in.Body.Value)}, nil
}

// deleteMemberSecret serves DELETE /v2/member-secrets/{secret_id}.
func (s *Server) deleteMemberSecret(ctx context.Context, in *memberSecretPath) (*struct{}, error) {
	if err := s.credentials.DeleteMemberSecret(ctx, callerFrom(ctx), in.SecretID); err != nil {
		return nil, storeError(err, "secret")
	}
	return nil, nil
}
