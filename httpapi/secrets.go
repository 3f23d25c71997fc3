package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
)

// The secret stores (spec: Environment variables, Member secrets, Provider credentials). Values
// are sealed with the server's secrets key as they arrive; answers carry masked_value (see
// secrets.Mask), and value only in the answer to the request that set it.

const (
	envNamePattern = `^[A-Za-z_][A-Za-z0-9_]*$`
	maxSecretValue = 65536
)

// requireSecrets refuses, with 503, what needs a secrets key on a server without one.
func (s *Server) requireSecrets() error {
	if s.secrets == nil {
		return newAPIError(http.StatusServiceUnavailable, "this server has no secrets key configured (PROCTOR_SECRETS_KEY_FILE), so it stores no secrets")
	}
	return nil
}

func (s *Server) registerSecrets() {
	tags := []string{"Environment variables"}
	errs := []int{http.StatusNotFound, http.StatusServiceUnavailable}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-env-vars", Method: http.MethodGet, Path: "/env-vars", Tags: tags, Summary: "List an environment's variables",
		Description: "Masked values, by name. Only the environment's own team sees them.", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listEnvVars)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "set-env-var", Method: http.MethodPost, Path: "/env-vars", Tags: tags, Summary: "Set an environment variable",
		Description:   "Creates the variable, or updates the one of that name. The answer carries the value; listings do not.",
		DefaultStatus: http.StatusCreated, Errors: errs,
	}, authKeyOrSession), s.setEnvVar)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "replace-env-vars", Method: http.MethodPut, Path: "/env-vars/batch", Tags: tags, Summary: "Replace an environment's variables",
		Description: "Makes the given variables the environment's whole set, atomically: names not given are deleted.", Errors: errs,
	}, authKeyOrSession), s.replaceEnvVars)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "check-env-vars", Method: http.MethodPost, Path: "/env-vars/check", Tags: tags, Summary: "Check environments' variables",
		Description: "For each environment, the variables its latest build requires (an envserver environment declares them with " +
			"envserver.WithRequiredEnv; they are recorded in the build's lock as required_env) against those configured.",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.checkEnvVars)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "update-env-var", Method: http.MethodPatch, Path: "/env-vars/{var_id}", Tags: tags, Summary: "Change a variable's value",
		Errors: errs,
	}, authKeyOrSession), s.updateEnvVar)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "delete-env-var", Method: http.MethodDelete, Path: "/env-vars/{var_id}", Tags: tags, Summary: "Delete a variable",
		DefaultStatus: http.StatusNoContent, Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.deleteEnvVar)

	tags = []string{"Member secrets"}
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

	tags = []string{"Provider credentials"}
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

// EnvVar is an environment variable as answers show it.
type EnvVar struct {
	ID          uuid.UUID `json:"id"`
	RegistryID  uuid.UUID `json:"registry_id"`
	Name        string    `json:"name"`
	MaskedValue string    `json:"masked_value"`
	Value       *string   `json:"value,omitempty" doc:"only in the answer to the request that set it"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func envVarFromModel(v *models.EnvVar, value *string) EnvVar {
	return EnvVar{ID: v.ID, RegistryID: v.RegistryID, Name: v.Name, MaskedValue: v.MaskedValue, Value: value, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt}
}

type listEnvVarsInput struct {
	RegistryID uuid.UUID `query:"registry_id" required:"true"`
}

type listEnvVarsOutput struct {
	Body struct {
		Variables []EnvVar `json:"variables" nullable:"false"`
	}
}

// listEnvVars serves GET /v2/env-vars: an environment's variables, masked.
func (s *Server) listEnvVars(ctx context.Context, in *listEnvVarsInput) (*listEnvVarsOutput, error) {
	vars, err := s.store.ListEnvVars(ctx, callerFrom(ctx), in.RegistryID)
	if err != nil {
		return nil, storeError(err, "environment")
	}
	out := &listEnvVarsOutput{}
	out.Body.Variables = make([]EnvVar, len(vars))
	for i := range vars {
		out.Body.Variables[i] = envVarFromModel(&vars[i], nil)
	}
	return out, nil
}

type setEnvVarInput struct {
	Body struct {
		RegistryID uuid.UUID `json:"registry_id"`
		Name       string    `json:"name" minLength:"1" maxLength:"128" pattern:"^[A-Za-z_][A-Za-z0-9_]*$" doc:"a POSIX environment variable name"`
		Value      string    `json:"value" maxLength:"65536"`
	}
}

type envVarOutput struct{ Body EnvVar }

// setEnvVar serves POST /v2/env-vars: create or update a variable by name.
func (s *Server) setEnvVar(ctx context.Context, in *setEnvVarInput) (*envVarOutput, error) {
	if err := s.requireSecrets(); err != nil {
		return nil, err
	}
	v, err := s.store.SetEnvVar(ctx, callerFrom(ctx), s.secrets, in.Body.RegistryID, in.Body.Name, in.Body.Value)
	if err != nil {
		return nil, storeError(err, "environment")
	}
	return &envVarOutput{Body: envVarFromModel(v, &in.Body.Value)}, nil
}

type envVarPath struct {
	VarID uuid.UUID `path:"var_id"`
}

type updateEnvVarInput struct {
	VarID uuid.UUID `path:"var_id"`
	Body  struct {
		Value string `json:"value" maxLength:"65536"`
	}
}

// updateEnvVar serves PATCH /v2/env-vars/{var_id}: change a variable's value.
func (s *Server) updateEnvVar(ctx context.Context, in *updateEnvVarInput) (*envVarOutput, error) {
	if err := s.requireSecrets(); err != nil {
		return nil, err
	}
	v, err := s.store.UpdateEnvVar(ctx, callerFrom(ctx), s.secrets, in.VarID, in.Body.Value)
	if err != nil {
		return nil, storeError(err, "environment variable")
	}
	return &envVarOutput{Body: envVarFromModel(v, &in.Body.Value)}, nil
}

// deleteEnvVar serves DELETE /v2/env-vars/{var_id}.
func (s *Server) deleteEnvVar(ctx context.Context, in *envVarPath) (*struct{}, error) {
	if err := s.store.DeleteEnvVar(ctx, callerFrom(ctx), in.VarID); err != nil {
		return nil, storeError(err, "environment variable")
	}
	return nil, nil
}

// EnvVarValue is one variable of a full set.
type EnvVarValue struct {
	Name  string `json:"name" minLength:"1" maxLength:"128" pattern:"^[A-Za-z_][A-Za-z0-9_]*$"`
	Value string `json:"value" maxLength:"65536"`
}

type replaceEnvVarsInput struct {
	Body struct {
		RegistryID uuid.UUID     `json:"registry_id"`
		Variables  []EnvVarValue `json:"variables" maxItems:"500" nullable:"false"`
	}
}

// Resolve refuses a set that names a variable twice.
func (in *replaceEnvVarsInput) Resolve(huma.Context) []error {
	seen := map[string]bool{}
	var errs []error
	for i, v := range in.Body.Variables {
		if seen[v.Name] {
			errs = append(errs, &huma.ErrorDetail{Location: "body.variables[" + strconv.Itoa(i) + "].name", Message: "named twice", Value: v.Name})
		}
		seen[v.Name] = true
	}
	return errs
}

type replaceEnvVarsOutput struct {
	Body struct {
		Created int `json:"created"`
		Updated int `json:"updated"`
		Deleted int `json:"deleted"`
	}
}

// replaceEnvVars serves PUT /v2/env-vars/batch: replace an environment's whole set, atomically.
func (s *Server) replaceEnvVars(ctx context.Context, in *replaceEnvVarsInput) (*replaceEnvVarsOutput, error) {
	if err := s.requireSecrets(); err != nil {
		return nil, err
	}
	vars := make([]models.NameValue, len(in.Body.Variables))
	for i, v := range in.Body.Variables {
		vars[i] = models.NameValue{Name: v.Name, Value: v.Value}
	}
	c, u, d, err := s.store.ReplaceEnvVars(ctx, callerFrom(ctx), s.secrets, in.Body.RegistryID, vars)
	if err != nil {
		return nil, storeError(err, "environment")
	}
	out := &replaceEnvVarsOutput{}
	out.Body.Created, out.Body.Updated, out.Body.Deleted = c, u, d
	return out, nil
}

type checkEnvVarsInput struct {
	Body struct {
		RegistryIDs []uuid.UUID `json:"registry_ids" minItems:"1" maxItems:"100"`
	}
}

// EnvCheck says whether an environment has the variables its latest build requires.
type EnvCheck struct {
	RegistryID     uuid.UUID `json:"registry_id"`
	RequiredVars   []string  `json:"required_vars" nullable:"false"`
	ConfiguredVars []string  `json:"configured_vars" nullable:"false"`
	MissingVars    []string  `json:"missing_vars" nullable:"false"`
	IsComplete     bool      `json:"is_complete"`
}

type checkEnvVarsOutput struct {
	Body struct {
		Environments []EnvCheck `json:"environments" nullable:"false"`
	}
}

// checkEnvVars serves POST /v2/env-vars/check.
func (s *Server) checkEnvVars(ctx context.Context, in *checkEnvVarsInput) (*checkEnvVarsOutput, error) {
	checks, err := s.store.CheckEnvVars(ctx, callerFrom(ctx), in.Body.RegistryIDs)
	if err != nil {
		return nil, storeError(err, "environment")
	}
	out := &checkEnvVarsOutput{}
	out.Body.Environments = make([]EnvCheck, len(checks))
	for i, c := range checks {
		out.Body.Environments[i] = EnvCheck{RegistryID: c.RegistryID, RequiredVars: c.Required, ConfiguredVars: c.Configured,
			MissingVars: c.Missing, IsComplete: len(c.Missing) == 0}
	}
	return out, nil
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
	list, err := s.store.ListMemberSecrets(ctx, callerFrom(ctx))
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
	m, err := s.store.SetMemberSecret(ctx, callerFrom(ctx), s.secrets, in.Body.Name, in.Body.Value, in.Body.Provider)
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
	m, err := s.store.UpdateMemberSecret(ctx, callerFrom(ctx), s.secrets, in.SecretID, in.Body.Value, in.Body.Provider.Sent, provider)
	if err != nil {
		return nil, storeError(err, "secret")
	}
	return &memberSecretOutput{Body: memberSecretFromModel(m, in.Body.Value)}, nil
}

// deleteMemberSecret serves DELETE /v2/member-secrets/{secret_id}.
func (s *Server) deleteMemberSecret(ctx context.Context, in *memberSecretPath) (*struct{}, error) {
	if err := s.store.DeleteMemberSecret(ctx, callerFrom(ctx), in.SecretID); err != nil {
		return nil, storeError(err, "secret")
	}
	return nil, nil
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
	list, err := s.store.ListByokCredentials(ctx, callerFrom(ctx))
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
	b, err := s.store.SetByokCredential(ctx, callerFrom(ctx), s.secrets, in.Body.Scope, in.Body.Provider, in.Body.Name, in.Body.APIKey)
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
	b, err := s.store.RotateByokCredential(ctx, callerFrom(ctx), s.secrets, in.CredentialID, in.Body.APIKey, in.Body.Name)
	if err != nil {
		return nil, storeError(err, "credential")
	}
	return &byokOutput{Body: byokFromModel(b)}, nil
}

// deleteByok serves DELETE /v2/byok-credentials/{credential_id}.
func (s *Server) deleteByok(ctx context.Context, in *byokPath) (*struct{}, error) {
	if err := s.store.DeleteByokCredential(ctx, callerFrom(ctx), in.CredentialID); err != nil {
		return nil, storeError(err, "credential")
	}
	return nil, nil
}
