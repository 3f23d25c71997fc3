package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/credentials"
)

// registerEnvVars registers an environment's variables.
func (s *Server) registerEnvVars() {
	tags := []string{"Environment variables"}
	errs := []int{http.StatusNotFound, http.StatusServiceUnavailable}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-env-vars", Method: http.MethodGet, Path: "/env-vars", Tags: tags, Summary: "List an environment's variables",
		Description: "Masked values, by name. Only the environment's own team sees them.", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listEnvVars)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "set-env-var", Method: http.MethodPost, Path: "/env-vars", Tags: tags, Summary: "Set an environment variable",
		Description:   "Creates the variable, or updates the one of that name. The answer carries the value; listings do not.",
		DefaultStatus: http.StatusCreated, Errors: errs,
	}, authKeyOrSession)), s.setEnvVar)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "replace-env-vars", Method: http.MethodPut, Path: "/env-vars/batch", Tags: tags, Summary: "Replace an environment's variables",
		Description: "Makes the given variables the environment's whole set, atomically: names not given are deleted.", Errors: errs,
	}, authKeyOrSession)), s.replaceEnvVars)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "check-env-vars", Method: http.MethodPost, Path: "/env-vars/check", Tags: tags, Summary: "Check environments' variables",
		Description: "For each environment, the variables its latest build requires (an envserver environment declares them with " +
			"envserver.WithRequiredEnv; they are recorded in the build's lock as required_env) against those configured.",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.checkEnvVars)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "update-env-var", Method: http.MethodPatch, Path: "/env-vars/{var_id}", Tags: tags, Summary: "Change a variable's value",
		Errors: errs,
	}, authKeyOrSession)), s.updateEnvVar)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "delete-env-var", Method: http.MethodDelete, Path: "/env-vars/{var_id}", Tags: tags, Summary: "Delete a variable",
		DefaultStatus: http.StatusNoContent, Errors: []int{http.StatusNotFound},
	}, authKeyOrSession)), s.deleteEnvVar)
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
	vars, err := s.credentials.ListEnvVars(ctx, callerFrom(ctx), in.RegistryID)
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
	v, err := s.credentials.SetEnvVar(ctx, callerFrom(ctx), s.secrets, in.Body.RegistryID, in.Body.Name, in.Body.Value)
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
	v, err := s.credentials.UpdateEnvVar(ctx, callerFrom(ctx), s.secrets, in.VarID, in.Body.Value)
	if err != nil {
		return nil, storeError(err, "environment variable")
	}
	return &envVarOutput{Body: envVarFromModel(v, &in.Body.Value)}, nil
}

// deleteEnvVar serves DELETE /v2/env-vars/{var_id}.
func (s *Server) deleteEnvVar(ctx context.Context, in *envVarPath) (*struct{}, error) {
	if err := s.credentials.DeleteEnvVar(ctx, callerFrom(ctx), in.VarID); err != nil {
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
	vars := make([]credentials.NameValue, len(in.Body.Variables))
	for i, v := range in.Body.Variables {
		vars[i] = credentials.NameValue{Name: v.Name, Value: v.Value}
	}
	c, u, d, err := s.credentials.ReplaceEnvVars(ctx, callerFrom(ctx), s.secrets, in.Body.RegistryID, vars)
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
	checks, err := s.credentials.CheckEnvVars(ctx, callerFrom(ctx), in.Body.RegistryIDs)
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
