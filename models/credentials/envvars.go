package credentials

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// EnvVarContext is what an environment variable's ciphertext is bound to.
func EnvVarContext(id uuid.UUID) string { return "env-var:" + id.String() }

// ownRegistry loads an environment the caller's team owns (another team's, public or not, is
// not found: its variables are its owners' alone).
func ownRegistry(ctx context.Context, db bun.IDB, c *models.Caller, id uuid.UUID) (*models.Registry, error) {
	var reg models.Registry
	if err := db.NewSelect().Model(&reg).Where("id = ? AND team_id = ?", id, c.TeamID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "environment")
	}
	return &reg, nil
}

// ListEnvVars lists an environment's variables by name.
func (s *Store) ListEnvVars(ctx context.Context, c *models.Caller, registryID uuid.UUID) ([]models.EnvVar, error) {
	if _, err := ownRegistry(ctx, s.DB, c, registryID); err != nil {
		return nil, err
	}
	var vars []models.EnvVar
	if err := s.DB.NewSelect().Model(&vars).Where("registry_id = ?", registryID).Order("name ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("env vars: %w", err)
	}
	return vars, nil
}

// SetEnvVar creates an environment's variable, or updates the one of that name.
func (s *Store) SetEnvVar(ctx context.Context, c *models.Caller, sl Sealer, registryID uuid.UUID, name, value string) (*models.EnvVar, error) {
	var v models.EnvVar
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := ownRegistry(ctx, tx, c, registryID); err != nil {
			return err
		}
		_, err := setEnvVar(ctx, tx, sl, c.TeamID, registryID, name, value, &v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// setEnvVar upserts one variable into v and says whether it was created.
func setEnvVar(ctx context.Context, tx bun.Tx, sl Sealer, teamID, registryID uuid.UUID, name, value string, v *models.EnvVar) (bool, error) {
	err := tx.NewSelect().Model(v).Where("registry_id = ? AND name = ?", registryID, name).Scan(ctx)
	created := models.IsNoRows(err)
	if err != nil && !created {
		return false, err
	}
	if created {
		*v = models.EnvVar{ID: uuid.New(), TeamID: teamID, RegistryID: registryID, Name: name, CreatedAt: models.Now()}
	}
	ct, masked, err := seal(sl, value, EnvVarContext(v.ID))
	if err != nil {
		return false, err
	}
	v.Ciphertext, v.MaskedValue, v.UpdatedAt = ct, masked, models.Now()
	if created {
		_, err = tx.NewInsert().Model(v).Exec(ctx)
	} else {
		_, err = tx.NewUpdate().Model(v).Column("ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx)
	}
	return created, err
}

// envVarFor loads a variable of an environment the caller's team owns.
func envVarFor(ctx context.Context, db bun.IDB, c *models.Caller, id uuid.UUID) (*models.EnvVar, error) {
	var v models.EnvVar
	if err := db.NewSelect().Model(&v).Where("id = ? AND team_id = ?", id, c.TeamID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "environment variable")
	}
	return &v, nil
}

// UpdateEnvVar changes a variable's value.
func (s *Store) UpdateEnvVar(ctx context.Context, c *models.Caller, sl Sealer, id uuid.UUID, value string) (*models.EnvVar, error) {
	v, err := envVarFor(ctx, s.DB, c, id)
	if err != nil {
		return nil, err
	}
	if v.Ciphertext, v.MaskedValue, err = seal(sl, value, EnvVarContext(v.ID)); err != nil {
		return nil, err
	}
	v.UpdatedAt = models.Now()
	if _, err := s.DB.NewUpdate().Model(v).Column("ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// DeleteEnvVar deletes a variable.
func (s *Store) DeleteEnvVar(ctx context.Context, c *models.Caller, id uuid.UUID) error {
	res, err := s.DB.NewDelete().Model((*models.EnvVar)(nil)).Where("id = ? AND team_id = ?", id, c.TeamID).Exec(ctx)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("environment variable %s: %w", id, models.ErrNotFound)
	}
	return nil
}

// NameValue is one variable of a full set.
type NameValue struct {
	Name  string
	Value string
}

// ReplaceEnvVars makes vars the environment's whole set of variables, in one transaction.
func (s *Store) ReplaceEnvVars(ctx context.Context, c *models.Caller, sl Sealer, registryID uuid.UUID, vars []NameValue) (created, updated, deleted int, err error) {
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		created, updated, deleted = 0, 0, 0
		if _, err := ownRegistry(ctx, tx, c, registryID); err != nil {
			return err
		}
		names := make([]string, 0, len(vars))
		for _, nv := range vars {
			var v models.EnvVar
			made, err := setEnvVar(ctx, tx, sl, c.TeamID, registryID, nv.Name, nv.Value, &v)
			if err != nil {
				return err
			}
			if made {
				created++
			} else {
				updated++
			}
			names = append(names, nv.Name)
		}
		q := tx.NewDelete().Model((*models.EnvVar)(nil)).Where("registry_id = ?", registryID)
		if len(names) > 0 {
			q = q.Where("name NOT IN (?)", bun.In(names))
		}
		res, err := q.Exec(ctx)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		deleted = int(n)
		return nil
	})
	return created, updated, deleted, err
}

// EnvVarNames lists the names of an environment's variables.
func (s *Store) EnvVarNames(ctx context.Context, registryID uuid.UUID) ([]string, error) {
	var names []string
	err := s.DB.NewSelect().Model((*models.EnvVar)(nil)).Column("name").Where("registry_id = ?", registryID).Order("name ASC").Scan(ctx, &names)
	return names, err
}

// requiredEnv is the variables a build's lock says its environment requires, sorted, once each.
func requiredEnv(lock models.BuildLock) []string {
	out := slices.Clone(lock.RequiredEnv)
	slices.Sort(out)
	return slices.Compact(out)
}

// EnvCheck is whether an environment has every variable its latest build requires.
type EnvCheck struct {
	RegistryID uuid.UUID
	Required   []string
	Configured []string
	Missing    []string
}

// CheckEnvVars checks the caller's team's environments against what their latest builds require.
func (s *Store) CheckEnvVars(ctx context.Context, c *models.Caller, ids []uuid.UUID) ([]EnvCheck, error) {
	out := make([]EnvCheck, 0, len(ids))
	for _, id := range ids {
		reg, err := ownRegistry(ctx, s.DB, c, id)
		if err != nil {
			return nil, err
		}
		chk := EnvCheck{RegistryID: id, Required: []string{}, Missing: []string{}}
		if reg.LatestBuildID != nil {
			var b models.Build
			if err := s.DB.NewSelect().Model(&b).Column("lock").Where("id = ?", *reg.LatestBuildID).Scan(ctx); err != nil {
				return nil, err
			}
			chk.Required = models.NonNil(requiredEnv(b.Lock)) // a build that requires nothing has no list
		}
		if chk.Configured, err = s.EnvVarNames(ctx, id); err != nil {
			return nil, err
		}
		if chk.Configured == nil {
			chk.Configured = []string{}
		}
		for _, r := range chk.Required {
			if !slices.Contains(chk.Configured, r) {
				chk.Missing = append(chk.Missing, r)
			}
		}
		out = append(out, chk)
	}
	return out, nil
}
