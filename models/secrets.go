package models

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/proctorhq/proctor/internal/secrets"
)

// Sealer seals and opens secret values at rest; internal/secrets.Keyring is one. Every value is
// bound to its row (see EnvVarContext and the others), so a ciphertext moved to another row does
// not open.
type Sealer interface {
	Encrypt(plaintext []byte, context string) ([]byte, error)
	Decrypt(ciphertext []byte, context string) ([]byte, error)
}

// EnvVar is an environment variable of an environment, passed to its sandboxes at launch.
type EnvVar struct {
	bun.BaseModel `bun:"table:env_vars,alias:ev"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	RegistryID    uuid.UUID `bun:"registry_id,type:uuid"`
	Name          string    `bun:"name"`
	Ciphertext    []byte    `bun:"ciphertext"`
	MaskedValue   string    `bun:"masked_value"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// EnvVarContext is what an environment variable's ciphertext is bound to.
func EnvVarContext(id uuid.UUID) string { return "env-var:" + id.String() }

// MemberSecret is a secret of one member, private to them; bound to a model provider it is their
// key for that provider, else it is passed to the sandboxes of the attempts they launch.
type MemberSecret struct {
	bun.BaseModel `bun:"table:member_secrets,alias:ms"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	MembershipID  int64     `bun:"membership_id"`
	Name          string    `bun:"name"`
	Provider      *string   `bun:"provider"`
	Ciphertext    []byte    `bun:"ciphertext"`
	MaskedValue   string    `bun:"masked_value"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// MemberSecretContext is what a member secret's ciphertext is bound to.
func MemberSecretContext(id uuid.UUID) string { return "member-secret:" + id.String() }

// BYOK scopes: a credential is one member's or the whole team's.
const (
	ScopePersonal = "personal"
	ScopeTeam     = "team"
)

// ByokCredential is a model provider key (bring-your-own-key), one per provider per scope.
type ByokCredential struct {
	bun.BaseModel `bun:"table:byok_credentials,alias:bc"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	Scope         string    `bun:"scope"`
	MembershipID  *int64    `bun:"membership_id"`
	// OwnerKey is "team" or "member:<id>": with TeamID and Provider it is unique.
	OwnerKey    string     `bun:"owner_key"`
	Provider    string     `bun:"provider"`
	Name        string     `bun:"name"`
	Ciphertext  []byte     `bun:"ciphertext"`
	MaskedValue string     `bun:"masked_value"`
	CreatedBy   *int64     `bun:"created_by"`
	CreatedAt   time.Time  `bun:"created_at"`
	UpdatedAt   time.Time  `bun:"updated_at"`
	LastUsedAt  *time.Time `bun:"last_used_at"`
}

// ByokContext is what a provider credential's ciphertext is bound to.
func ByokContext(id uuid.UUID) string { return "byok:" + id.String() }

// seal encrypts value for context and masks it.
func seal(s Sealer, value, context string) ([]byte, string, error) {
	ct, err := s.Encrypt([]byte(value), context)
	if err != nil {
		return nil, "", fmt.Errorf("seal a secret: %w", err)
	}
	return ct, secrets.Mask(value), nil
}

// ownRegistry loads an environment the caller's team owns (another team's, public or not, is
// not found: its variables are its owners' alone).
func ownRegistry(ctx context.Context, db bun.IDB, c *Caller, id uuid.UUID) (*Registry, error) {
	var reg Registry
	if err := db.NewSelect().Model(&reg).Where("id = ? AND team_id = ?", id, c.TeamID).Scan(ctx); err != nil {
		return nil, notFound(err, "environment")
	}
	return &reg, nil
}

// ListEnvVars lists an environment's variables by name.
func (s *Store) ListEnvVars(ctx context.Context, c *Caller, registryID uuid.UUID) ([]EnvVar, error) {
	if _, err := ownRegistry(ctx, s.DB, c, registryID); err != nil {
		return nil, err
	}
	var vars []EnvVar
	if err := s.DB.NewSelect().Model(&vars).Where("registry_id = ?", registryID).Order("name ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("env vars: %w", err)
	}
	return vars, nil
}

// SetEnvVar creates an environment's variable, or updates the one of that name.
func (s *Store) SetEnvVar(ctx context.Context, c *Caller, sl Sealer, registryID uuid.UUID, name, value string) (*EnvVar, error) {
	var v EnvVar
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
func setEnvVar(ctx context.Context, tx bun.Tx, sl Sealer, teamID, registryID uuid.UUID, name, value string, v *EnvVar) (bool, error) {
	err := tx.NewSelect().Model(v).Where("registry_id = ? AND name = ?", registryID, name).Scan(ctx)
	created := isNoRows(err)
	if err != nil && !created {
		return false, err
	}
	if created {
		*v = EnvVar{ID: uuid.New(), TeamID: teamID, RegistryID: registryID, Name: name, CreatedAt: now()}
	}
	ct, masked, err := seal(sl, value, EnvVarContext(v.ID))
	if err != nil {
		return false, err
	}
	v.Ciphertext, v.MaskedValue, v.UpdatedAt = ct, masked, now()
	if created {
		_, err = tx.NewInsert().Model(v).Exec(ctx)
	} else {
		_, err = tx.NewUpdate().Model(v).Column("ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx)
	}
	return created, err
}

// envVarFor loads a variable of an environment the caller's team owns.
func envVarFor(ctx context.Context, db bun.IDB, c *Caller, id uuid.UUID) (*EnvVar, error) {
	var v EnvVar
	if err := db.NewSelect().Model(&v).Where("id = ? AND team_id = ?", id, c.TeamID).Scan(ctx); err != nil {
		return nil, notFound(err, "environment variable")
	}
	return &v, nil
}

// UpdateEnvVar changes a variable's value.
func (s *Store) UpdateEnvVar(ctx context.Context, c *Caller, sl Sealer, id uuid.UUID, value string) (*EnvVar, error) {
	v, err := envVarFor(ctx, s.DB, c, id)
	if err != nil {
		return nil, err
	}
	if v.Ciphertext, v.MaskedValue, err = seal(sl, value, EnvVarContext(v.ID)); err != nil {
		return nil, err
	}
	v.UpdatedAt = now()
	if _, err := s.DB.NewUpdate().Model(v).Column("ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// DeleteEnvVar deletes a variable.
func (s *Store) DeleteEnvVar(ctx context.Context, c *Caller, id uuid.UUID) error {
	res, err := s.DB.NewDelete().Model((*EnvVar)(nil)).Where("id = ? AND team_id = ?", id, c.TeamID).Exec(ctx)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("environment variable %s: %w", id, ErrNotFound)
	}
	return nil
}

// NameValue is one variable of a full set.
type NameValue struct {
	Name  string
	Value string
}

// ReplaceEnvVars makes vars the environment's whole set of variables, in one transaction.
func (s *Store) ReplaceEnvVars(ctx context.Context, c *Caller, sl Sealer, registryID uuid.UUID, vars []NameValue) (created, updated, deleted int, err error) {
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		created, updated, deleted = 0, 0, 0
		if _, err := ownRegistry(ctx, tx, c, registryID); err != nil {
			return err
		}
		names := make([]string, 0, len(vars))
		for _, nv := range vars {
			var v EnvVar
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
		q := tx.NewDelete().Model((*EnvVar)(nil)).Where("registry_id = ?", registryID)
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
	err := s.DB.NewSelect().Model((*EnvVar)(nil)).Column("name").Where("registry_id = ?", registryID).Order("name ASC").Scan(ctx, &names)
	return names, err
}

// ListMemberSecrets lists the caller's own secrets by name.
func (s *Store) ListMemberSecrets(ctx context.Context, c *Caller) ([]MemberSecret, error) {
	var out []MemberSecret
	if err := s.DB.NewSelect().Model(&out).Where("membership_id = ?", c.MembershipID).Order("name ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("member secrets: %w", err)
	}
	return out, nil
}

// SetMemberSecret creates the caller's secret, or updates the one of that name; provider, when
// set, binds it to that model provider (a provider has at most one bound secret per member).
func (s *Store) SetMemberSecret(ctx context.Context, c *Caller, sl Sealer, name, value string, provider *string) (*MemberSecret, error) {
	var m MemberSecret
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		err := tx.NewSelect().Model(&m).Where("membership_id = ? AND name = ?", c.MembershipID, name).Scan(ctx)
		created := isNoRows(err)
		if err != nil && !created {
			return err
		}
		if created {
			m = MemberSecret{ID: uuid.New(), TeamID: c.TeamID, MembershipID: c.MembershipID, Name: name, CreatedAt: now()}
		}
		if provider != nil {
			m.Provider = provider
		}
		if m.Ciphertext, m.MaskedValue, err = seal(sl, value, MemberSecretContext(m.ID)); err != nil {
			return err
		}
		m.UpdatedAt = now()
		if created {
			_, err = tx.NewInsert().Model(&m).Exec(ctx)
		} else {
			_, err = tx.NewUpdate().Model(&m).Column("provider", "ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx)
		}
		return providerTaken(err, provider)
	})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

func providerTaken(err error, provider *string) error {
	if isUniqueViolation(err) && provider != nil {
		return fmt.Errorf("another of your secrets is bound to %s (one per provider): %w", *provider, ErrConflict)
	}
	return err
}

// UpdateMemberSecret changes the caller's secret: its value when value is set, its binding when
// setProvider (provider nil unbinds).
func (s *Store) UpdateMemberSecret(ctx context.Context, c *Caller, sl Sealer, id uuid.UUID, value *string, setProvider bool, provider *string) (*MemberSecret, error) {
	var m MemberSecret
	if err := s.DB.NewSelect().Model(&m).Where("id = ? AND membership_id = ?", id, c.MembershipID).Scan(ctx); err != nil {
		return nil, notFound(err, "secret")
	}
	var err error
	if value != nil {
		if m.Ciphertext, m.MaskedValue, err = seal(sl, *value, MemberSecretContext(m.ID)); err != nil {
			return nil, err
		}
	}
	if setProvider {
		m.Provider = provider
	}
	m.UpdatedAt = now()
	_, err = s.DB.NewUpdate().Model(&m).Column("provider", "ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx)
	if err := providerTaken(err, provider); err != nil {
		return nil, err
	}
	return &m, nil
}

// DeleteMemberSecret deletes the caller's secret.
func (s *Store) DeleteMemberSecret(ctx context.Context, c *Caller, id uuid.UUID) error {
	res, err := s.DB.NewDelete().Model((*MemberSecret)(nil)).Where("id = ? AND membership_id = ?", id, c.MembershipID).Exec(ctx)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("secret %s: %w", id, ErrNotFound)
	}
	return nil
}

// LaunchEnv is the environment an attempt's sandbox gets: the launching member's secrets that
// are bound to no provider, then the environment's variables, which win on a name clash. It
// opens every value with sl; a value that does not open is an error, never an empty variable.
func (s *Store) LaunchEnv(ctx context.Context, sl Sealer, registryID *uuid.UUID, teamID uuid.UUID, launcher *uuid.UUID) (map[string]string, error) {
	env := map[string]string{}
	if launcher == nil && registryID == nil {
		return env, nil
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
	err := s.DB.NewRaw(`SELECT 0 AS kind, ms.id, ms.name, ms.ciphertext FROM member_secrets AS ms
			JOIN memberships AS m ON m.id = ms.membership_id
			WHERE ? = FALSE AND m.team_id = ? AND m.user_id = ? AND ms.provider IS NULL
		UNION ALL
		SELECT 1 AS kind, ev.id, ev.name, ev.ciphertext FROM env_vars AS ev WHERE ? = FALSE AND ev.registry_id = ?
		ORDER BY kind`, noUser, teamID, user, noRegistry, registry).Scan(ctx, &sealed)
	if err != nil {
		return nil, fmt.Errorf("launch env: %w", err)
	}
	for _, v := range sealed {
		ctxName := MemberSecretContext(v.ID)
		if v.Kind == 1 {
			ctxName = EnvVarContext(v.ID)
		}
		if env[v.Name], err = open(sl, v.Name, v.Ciphertext, ctxName); err != nil {
			return nil, err
		}
	}
	return env, nil
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

// ListByokCredentials lists the caller's personal credentials and the team's.
func (s *Store) ListByokCredentials(ctx context.Context, c *Caller) ([]ByokCredential, error) {
	var out []ByokCredential
	err := s.DB.NewSelect().Model(&out).Where("team_id = ?", c.TeamID).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("scope = ?", ScopeTeam).WhereOr("membership_id = ?", c.MembershipID)
		}).Order("provider ASC", "scope ASC").Scan(ctx)
	return out, err
}

func ownerKey(c *Caller, scope string) string {
	if scope == ScopeTeam {
		return ScopeTeam
	}
	return fmt.Sprintf("member:%d", c.MembershipID)
}

// SetByokCredential creates, or replaces, the credential of provider in scope (personal: the
// caller's; team: the caller's team's, which only an owner may set).
func (s *Store) SetByokCredential(ctx context.Context, c *Caller, sl Sealer, scope, provider, name, value string) (*ByokCredential, error) {
	if scope == ScopeTeam && c.Role != RoleOwner {
		return nil, fmt.Errorf("only a team owner sets the team's provider credentials: %w", ErrForbidden)
	}
	var b ByokCredential
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		key := ownerKey(c, scope)
		err := tx.NewSelect().Model(&b).Where("team_id = ? AND owner_key = ? AND provider = ?", c.TeamID, key, provider).Scan(ctx)
		created := isNoRows(err)
		if err != nil && !created {
			return err
		}
		if created {
			b = ByokCredential{ID: uuid.New(), TeamID: c.TeamID, Scope: scope, OwnerKey: key, Provider: provider, CreatedAt: now(), CreatedBy: &c.MembershipID}
			if scope == ScopePersonal {
				b.MembershipID = &c.MembershipID
			}
		}
		b.Name = name
		if b.Ciphertext, b.MaskedValue, err = seal(sl, value, ByokContext(b.ID)); err != nil {
			return err
		}
		b.UpdatedAt = now()
		if created {
			_, err = tx.NewInsert().Model(&b).Exec(ctx)
		} else {
			_, err = tx.NewUpdate().Model(&b).Column("name", "ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// byokFor loads a credential the caller may change: their own, or (an owner) the team's.
func byokFor(ctx context.Context, db bun.IDB, c *Caller, id uuid.UUID) (*ByokCredential, error) {
	var b ByokCredential
	if err := db.NewSelect().Model(&b).Where("id = ? AND team_id = ?", id, c.TeamID).Scan(ctx); err != nil {
		return nil, notFound(err, "credential")
	}
	switch {
	case b.Scope == ScopePersonal && (b.MembershipID == nil || *b.MembershipID != c.MembershipID):
		return nil, fmt.Errorf("credential %s: %w", id, ErrNotFound)
	case b.Scope == ScopeTeam && c.Role != RoleOwner:
		return nil, fmt.Errorf("only a team owner changes the team's provider credentials: %w", ErrForbidden)
	}
	return &b, nil
}

// RotateByokCredential replaces a credential's key (and, when set, its name).
func (s *Store) RotateByokCredential(ctx context.Context, c *Caller, sl Sealer, id uuid.UUID, value string, name *string) (*ByokCredential, error) {
	b, err := byokFor(ctx, s.DB, c, id)
	if err != nil {
		return nil, err
	}
	if b.Ciphertext, b.MaskedValue, err = seal(sl, value, ByokContext(b.ID)); err != nil {
		return nil, err
	}
	if name != nil {
		b.Name = *name
	}
	b.UpdatedAt = now()
	if _, err := s.DB.NewUpdate().Model(b).Column("name", "ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// DeleteByokCredential deletes a credential, its ciphertext with it.
func (s *Store) DeleteByokCredential(ctx context.Context, c *Caller, id uuid.UUID) error {
	b, err := byokFor(ctx, s.DB, c, id)
	if err != nil {
		return err
	}
	_, err = s.DB.NewDelete().Model(b).WherePK().Exec(ctx)
	return err
}

// ProviderCredential is the key an attempt's model calls use, and where it came from.
type ProviderCredential struct {
	Key string
	// Source is byok-personal, member-secret or byok-team.
	Source string
	// ByokID is the credential's id when a BYOK credential was used.
	ByokID *uuid.UUID
}

// ProviderKey is the key the launching member's attempts use for provider, by precedence: their
// personal BYOK credential, their secret bound to provider, their team's BYOK credential. It is
// nil when there is none (the platform's key is used). Binding is explicit: a secret merely
// named like a provider is not used.
func (s *Store) ProviderKey(ctx context.Context, sl Sealer, teamID, userID uuid.UUID, provider string) (*ProviderCredential, error) {
	var m Membership
	if err := s.DB.NewSelect().Model(&m).Where("team_id = ? AND user_id = ?", teamID, userID).Scan(ctx); err != nil {
		if isNoRows(err) {
			return nil, nil // the launcher has left the team: the platform's key
		}
		return nil, err
	}
	var creds []ByokCredential
	if err := s.DB.NewSelect().Model(&creds).Where("team_id = ? AND provider = ? AND owner_key IN (?)", teamID, provider,
		bun.In([]string{ScopeTeam, fmt.Sprintf("member:%d", m.ID)})).Scan(ctx); err != nil {
		return nil, err
	}
	var team *ByokCredential
	for i := range creds {
		if creds[i].Scope == ScopePersonal {
			return s.useByok(ctx, sl, &creds[i], "byok-personal")
		}
		team = &creds[i]
	}
	var bound MemberSecret
	err := s.DB.NewSelect().Model(&bound).Where("membership_id = ? AND provider = ?", m.ID, provider).Scan(ctx)
	switch {
	case err == nil:
		key, err := open(sl, bound.Name, bound.Ciphertext, MemberSecretContext(bound.ID))
		if err != nil {
			return nil, err
		}
		return &ProviderCredential{Key: key, Source: "member-secret"}, nil
	case !isNoRows(err):
		return nil, err
	}
	if team != nil {
		return s.useByok(ctx, sl, team, "byok-team")
	}
	return nil, nil
}

// useByok opens a credential and records its use.
func (s *Store) useByok(ctx context.Context, sl Sealer, b *ByokCredential, source string) (*ProviderCredential, error) {
	key, err := open(sl, "the "+b.Provider+" credential", b.Ciphertext, ByokContext(b.ID))
	if err != nil {
		return nil, err
	}
	if _, err := s.DB.NewUpdate().Model((*ByokCredential)(nil)).Set("last_used_at = ?", now()).Where("id = ?", b.ID).Exec(ctx); err != nil {
		return nil, err
	}
	return &ProviderCredential{Key: key, Source: source, ByokID: &b.ID}, nil
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
	var bs []BuildSecret
	if err := s.DB.NewSelect().Model(&bs).Scan(ctx); err != nil {
		return nil, err
	}
	for _, r := range bs {
		out = append(out, sealedRow{"build_secrets", "build_id = ? AND name = ?", []any{r.BuildID, r.Name}, BuildSecretContext(r.BuildID, r.Name), r.Ciphertext})
	}
	var ev []EnvVar
	if err := s.DB.NewSelect().Model(&ev).Scan(ctx); err != nil {
		return nil, err
	}
	for _, r := range ev {
		out = append(out, sealedRow{"env_vars", "id = ?", []any{r.ID}, EnvVarContext(r.ID), r.Ciphertext})
	}
	var ms []MemberSecret
	if err := s.DB.NewSelect().Model(&ms).Scan(ctx); err != nil {
		return nil, err
	}
	for _, r := range ms {
		out = append(out, sealedRow{"member_secrets", "id = ?", []any{r.ID}, MemberSecretContext(r.ID), r.Ciphertext})
	}
	var bc []ByokCredential
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

// requiredEnv is the variables a build's lock says its environment requires, sorted, once each.
func requiredEnv(lock BuildLock) []string {
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
func (s *Store) CheckEnvVars(ctx context.Context, c *Caller, ids []uuid.UUID) ([]EnvCheck, error) {
	out := make([]EnvCheck, 0, len(ids))
	for _, id := range ids {
		reg, err := ownRegistry(ctx, s.DB, c, id)
		if err != nil {
			return nil, err
		}
		chk := EnvCheck{RegistryID: id, Required: []string{}, Missing: []string{}}
		if reg.LatestBuildID != nil {
			var b Build
			if err := s.DB.NewSelect().Model(&b).Column("lock").Where("id = ?", *reg.LatestBuildID).Scan(ctx); err != nil {
				return nil, err
			}
			chk.Required = requiredEnv(b.Lock)
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
