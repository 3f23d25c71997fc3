package models

import (
	"cmp"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// BuildOptions are what a trigger asked for. Build secrets are never among them: they reach the
// builder only, and are never stored.
type BuildOptions struct {
	// Source says where the source came from (informational, e.g. "cli" or a repository URL).
	Source string `json:"source,omitempty"`
	// EntryFolder is the directory of the archive that holds the environment.
	EntryFolder          string            `json:"entry_folder,omitempty"`
	BuildArgs            map[string]string `json:"build_args,omitempty"`
	EnvironmentVariables map[string]string `json:"environment_variables,omitempty"`
	NoCache              bool              `json:"no_cache,omitempty"`
	RuntimeProvider      string            `json:"runtime_provider,omitempty"`
	// Bundled names a bundled example environment (`… example-env NAME`) that the build
	// packages from the builder's examples binary (activities.BuildConfig.Bundled) instead of
	// compiling the source, which it keeps for browsing only. Only `proctor dev` sets it (the
	// API offers no way to), where no Go toolchain or checkout is at hand.
	Bundled string `json:"bundled,omitempty"`
	// ShellServer asks the build to add Proctor's shell server to the image as its command (an
	// image with no MCP server of its own: a Harbor task's); Dockerfile builds only.
	ShellServer bool `json:"shell_server,omitempty"`
	// Certify asks for the build to be certified once it succeeded (a child of its Build
	// workflow; see rollouts.Store.StartBuildCertification).
	Certify *CertifyOptions `json:"certify,omitempty"`
}

// CertifyOptions are what a build asked to be certified with: the taskset whose tasks of its
// environment are run, and the oracle's attempts per task.
type CertifyOptions struct {
	TasksetID uuid.UUID `json:"taskset_id"`
	K         int       `json:"k"`
	// MaxAttempts is the bound on a request's attempts of the server that took the trigger (0:
	// none).
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// BuildLog is one line of a build's log.
type BuildLog struct {
	bun.BaseModel `bun:"table:build_logs,alias:bl"`
	BuildID       uuid.UUID `bun:"build_id,pk,type:uuid"`
	Seq           int       `bun:"seq,pk"`
	Line          string    `bun:"line"`
	Time          time.Time `bun:"time"`
}

// BuildSecret is one of a build's secrets, sealed with the secrets key (internal/secrets) for
// the context BuildSecretContext names. It exists only while the build runs.
type BuildSecret struct {
	bun.BaseModel `bun:"table:build_secrets,alias:bs"`
	BuildID       uuid.UUID `bun:"build_id,pk,type:uuid"`
	Name          string    `bun:"name,pk"`
	Ciphertext    []byte    `bun:"ciphertext"`
}

// BuildRow is a build as one caller sees it.
type BuildRow struct {
	Build        `bun:",extend"`
	RegistryName string `bun:"registry_name,scanonly"`
	CanEdit      bool   `bun:"-"`
}

// Pin is the runtime config that pins an attempt to the build: its own image name (ENV:VERSION,
// the team's own first), since two builds, of two environments, can share a digest.
func (b *BuildRow) Pin() *RuntimeConfig { return &RuntimeConfig{Image: cmp.Or(b.ImageName, b.Digest)} }

// BuildUpload is a source upload a client reserved: its id becomes the build's.
type BuildUpload struct {
	bun.BaseModel `bun:"table:build_uploads,alias:bu"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID  `bun:"team_id,type:uuid"`
	CreatedBy     *uuid.UUID `bun:"created_by,type:uuid"`
	SourceKey     string     `bun:"source_key"`
	CreatedAt     time.Time  `bun:"created_at"`
	UsedAt        *time.Time `bun:"used_at"`
}

// Registry is an environment: a sandboxed application whose builds declare scenarios.
type Registry struct {
	bun.BaseModel `bun:"table:registries,alias:r"`
	ID            uuid.UUID      `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID      `bun:"team_id,type:uuid"`
	ProjectID     *uuid.UUID     `bun:"project_id,type:uuid"`
	Name          string         `bun:"name"`
	RegistryType  string         `bun:"registry_type"`
	Public        bool           `bun:"public"`
	Description   string         `bun:"description"`
	Branch        string         `bun:"branch"`
	BuildArgs     map[string]any `bun:"build_args"`
	EntryFolder   string         `bun:"entry_folder"`
	RepoURL       string         `bun:"repo_url"`
	LatestBuildID *uuid.UUID     `bun:"latest_build_id,type:uuid"`
	// CertifyBeforeLatest: a build becomes the latest only once its latest certification passed
	// (or forced); off by default.
	CertifyBeforeLatest bool      `bun:"certify_before_latest"`
	CreatedAt           time.Time `bun:"created_at"`
	UpdatedAt           time.Time `bun:"updated_at"`
}

// RegistryStar records that a user starred an environment.
type RegistryStar struct {
	bun.BaseModel `bun:"table:registry_stars"`
	RegistryID    uuid.UUID `bun:"registry_id,pk,type:uuid"`
	UserID        uuid.UUID `bun:"user_id,pk,type:uuid"`
	CreatedAt     time.Time `bun:"created_at"`
}

// Build turns an environment's source into a runnable image; Lock records what it serves.
type Build struct {
	bun.BaseModel     `bun:"table:builds,alias:b"`
	ID                uuid.UUID    `bun:"id,pk,type:uuid"`
	RegistryID        uuid.UUID    `bun:"registry_id,type:uuid"`
	TeamID            uuid.UUID    `bun:"team_id,type:uuid"`
	Version           int          `bun:"version"`
	Status            string       `bun:"status"`
	SourceIndexStatus string       `bun:"source_index_status"`
	Branch            string       `bun:"branch"`
	Digest            string       `bun:"digest"`
	DurationSeconds   *float64     `bun:"duration_seconds"`
	ErrorMessage      string       `bun:"error_message"`
	RepoURL           string       `bun:"repo_url"`
	ImageName         string       `bun:"image_name"`
	SourceKey         string       `bun:"source_key"`
	Lock              BuildLock    `bun:"lock"`
	RuntimeConfig     BuildRuntime `bun:"runtime_config"`
	// Options are the trigger's; ImageKey is the object-storage key of the image (an OCI
	// archive) a build from source made.
	Options   BuildOptions `bun:"options"`
	ImageKey  string       `bun:"image_key"`
	CreatedBy *uuid.UUID   `bun:"created_by,type:uuid"`
	CreatedAt time.Time    `bun:"created_at"`
	UpdatedAt time.Time    `bun:"updated_at"`
}

// Scenario is a parameterised task definition that one build of an environment declares.
type Scenario struct {
	bun.BaseModel     `bun:"table:scenarios,alias:sc"`
	ID                uuid.UUID      `bun:"id,pk,type:uuid"`
	RegistryID        uuid.UUID      `bun:"registry_id,type:uuid"`
	BuildID           uuid.UUID      `bun:"build_id,type:uuid"`
	Name              string         `bun:"name"`
	Slug              string         `bun:"slug"`
	Description       string         `bun:"description"`
	SetupDescription  string         `bun:"setup_description"`
	ArgsSchema        map[string]any `bun:"args_schema"`
	Arguments         []any          `bun:"arguments"`
	Metadata          map[string]any `bun:"metadata"`
	TraceNameTemplate string         `bun:"trace_name_template"`
	CreatedAt         time.Time      `bun:"created_at"`
}

// BuildSecretContext is what a build secret's ciphertext is bound to.
func BuildSecretContext(buildID uuid.UUID, name string) string {
	return "build-secret:" + buildID.String() + ":" + name
}
