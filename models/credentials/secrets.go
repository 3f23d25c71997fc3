package credentials

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/models"
)

// Sealer seals and opens secret values at rest; internal/secrets.Keyring is one. Every value is
// bound to its row (see EnvVarContext and the others), so a ciphertext moved to another row does
// not open.
type Sealer interface {
	Encrypt(plaintext []byte, context string) ([]byte, error)
	Decrypt(ciphertext []byte, context string) ([]byte, error)
}

// seal encrypts value for context and masks it.
func seal(s Sealer, value, context string) ([]byte, string, error) {
	ct, err := s.Encrypt([]byte(value), context)
	if err != nil {
		return nil, "", fmt.Errorf("seal a secret: %w", err)
	}
	return ct, secrets.Mask(value), nil
}

// open decrypts the stored value called name; without a key it is an error, never "".
func open(sl Sealer, name string, ct []byte, context string) (string, error) {
	if sl == nil {
		return "", fmt.Errorf("%s is stored sealed, and this process has no secrets key to open it", name)
	}
	v, err := sl.Decrypt(ct, context)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return string(v), nil
}

// LaunchFor names whose environment an attempt's sandbox gets: see [Store.LaunchEnv].
type LaunchFor struct {
	// Sealer opens the stored values (nil: this process has no secrets key).
	Sealer Sealer
	// RegistryID is the environment whose variables it gets (nil: none).
	RegistryID *uuid.UUID
	// TeamID and Launcher are the member whose unbound secrets it gets (nil Launcher: none).
	TeamID   uuid.UUID
	Launcher *uuid.UUID
}

// LaunchEnv is the environment an attempt's sandbox gets: the launching member's secrets that
// are bound to no provider, then the environment's variables, which win on a name clash. It
// opens every value with l.Sealer; a value that does not open is a [LaunchEnvError], never an
// empty variable. rollouts.Store.BeginTry reads it, through LaunchEnvIn, as a try begins.
func (s *Store) LaunchEnv(ctx context.Context, l LaunchFor) (map[string]string, error) {
	env, _, err := LaunchEnvIn(ctx, s.DB, l)
	return env, err
}

// LaunchEnvIn is LaunchEnv read through db, which may be a transaction of the caller's. It also
// answers the values of the member's secrets that the environment holds (those no variable of the
// same name replaced): what the attempt's records must not show (see activities' redaction).
func LaunchEnvIn(ctx context.Context, db bun.IDB, l LaunchFor) (env map[string]string, secretValues []string, err error) {
	env = map[string]string{}
	launcher, registryID, teamID := l.Launcher, l.RegistryID, l.TeamID
	if launcher == nil && registryID == nil {
		return env, nil, nil
	}
	// One statement: the member's secrets (kind 0), then the variables (kind 1), which win.
	var sealed []struct {
		Kind       int       `bun:"kind"`
		ID         uuid.UUID `bun:"id,type:uuid"`
		Name       string    `bun:"name"`
		Ciphertext []byte    `bun:"ciphertext"`
	}
	noUser, noRegistry := launcher == nil, registryID == nil
	user, registry := uuid.Nil, uuid.Nil
	if !noUser {
		user = *launcher
	}
	if !noRegistry {
		registry = *registryID
	}
	err = db.NewRaw(`SELECT 0 AS kind, ms.id, ms.name, ms.ciphertext FROM member_secrets AS ms
			JOIN memberships AS m ON m.id = ms.membership_id
			WHERE ? = FALSE AND m.team_id = ? AND m.user_id = ? AND ms.provider IS NULL
		UNION ALL
		SELECT 1 AS kind, ev.id, ev.name, ev.ciphertext FROM env_vars AS ev WHERE ? = FALSE AND ev.registry_id = ?
		ORDER BY kind`, noUser, teamID, user, noRegistry, registry).Scan(ctx, &sealed)
	if err != nil {
		return nil, nil, fmt.Errorf("launch env: %w", err)
	}
	secret := map[string]bool{}
	for _, v := range sealed {
		ctxName := MemberSecretContext(v.ID)
		if v.Kind == 1 {
			ctxName = EnvVarContext(v.ID)
		}
		if env[v.Name], err = open(l.Sealer, v.Name, v.Ciphertext, ctxName); err != nil {
			return nil, nil, &models.LaunchEnvError{Err: err}
		}
		secret[v.Name] = v.Kind == 0
	}
	for name, isSecret := range secret {
		if isSecret {
			secretValues = append(secretValues, env[name])
		}
	}
	return env, secretValues, nil
}

// sealedRow is one stored secret value, for re-wrapping.
type sealedRow struct {
	table      string
	where      string // picks the row out of table
	args       []any
	context    string
	ciphertext []byte
}

// sealedRows lists every secret value stored sealed.
func (s *Store) sealedRows(ctx context.Context) ([]sealedRow, error) {
	var out []sealedRow
	var bs []models.BuildSecret
	if err := s.DB.NewSelect().Model(&bs).Scan(ctx); err != nil {
		return nil, err
	}
	for _, r := range bs {
		out = append(out, sealedRow{"build_secrets", "build_id = ? AND name = ?", []any{r.BuildID, r.Name}, models.BuildSecretContext(r.BuildID, r.Name), r.Ciphertext})
	}
	var ev []models.EnvVar
	if err := s.DB.NewSelect().Model(&ev).Scan(ctx); err != nil {
		return nil, err
	}
	for _, r := range ev {
		out = append(out, sealedRow{"env_vars", "id = ?", []any{r.ID}, EnvVarContext(r.ID), r.Ciphertext})
	}
	var ms []models.MemberSecret
	if err := s.DB.NewSelect().Model(&ms).Scan(ctx); err != nil {
		return nil, err
	}
	for _, r := range ms {
		out = append(out, sealedRow{"member_secrets", "id = ?", []any{r.ID}, MemberSecretContext(r.ID), r.Ciphertext})
	}
	var bc []models.ByokCredential
	if err := s.DB.NewSelect().Model(&bc).Scan(ctx); err != nil {
		return nil, err
	}
	for _, r := range bc {
		out = append(out, sealedRow{"byok_credentials", "id = ?", []any{r.ID}, ByokContext(r.ID), r.Ciphertext})
	}
	return out, nil
}

// RewrapSecrets passes every secret stored sealed through rewrap (given its ciphertext and the
// context it is bound to) and stores what rewrap changed; it returns how many changed.
func (s *Store) RewrapSecrets(ctx context.Context, rewrap func(ciphertext []byte, context string) ([]byte, bool, error)) (int, error) {
	rows, err := s.sealedRows(ctx)
	if err != nil {
		return 0, fmt.Errorf("stored secrets: %w", err)
	}
	n := 0
	for _, r := range rows {
		ct, changed, err := rewrap(r.ciphertext, r.context)
		if err != nil {
			return n, fmt.Errorf("%s: %w", r.context, err)
		}
		if !changed {
			continue
		}
		if _, err := s.DB.NewUpdate().Table(r.table).Set("ciphertext = ?", ct).Where(r.where, r.args...).Exec(ctx); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
