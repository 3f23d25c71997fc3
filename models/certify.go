package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Certification statuses: running while its job runs; then passed (no task flagged), flagged
// (some task is), or failed (its job was cancelled before every attempt ended).
const (
	CertificationRunning = "running"
	CertificationPassed  = "passed"
	CertificationFlagged = "flagged"
	CertificationFailed  = "failed"
)

// Flags of a certified task.
const (
	// FlagOracleFails: the oracle (the task's own validation calls) never reached full reward.
	FlagOracleFails = "oracle_fails"
	// FlagFlaky: the oracle reached full reward on some of its k runs, not all.
	FlagFlaky = "flaky"
	// FlagPassesWithoutWork: an agent that makes no tool call, or one that calls tools with
	// random arguments, reached full reward.
	FlagPassesWithoutWork = "passes_without_work"
	// FlagTamperable: a call of the hidden setup or evaluate dispatcher by the tamper probe was not
	// refused, or the probe (which also claims success through the visible tools that write what
	// a grader might read) reached full reward where doing nothing did not.
	FlagTamperable = "tamperable"
	// FlagUnfinished: some of the task's attempts ended without a reward (an error of the
	// infrastructure, a cancel): its figures are short.
	FlagUnfinished = "unfinished"
)

// Model names of the certification's agents (the oracle replays a task's validation calls; the
// idle agent makes no tool call and says it is done; the random agent calls tools with random
// arguments their schemas allow, then says it is done).
const (
	OracleModelName = "oracle"
	IdleModelName   = "idle"
	RandomModelName = "random"
	TamperModelName = "tamper"
)

// Certification is a certification of an environment build (a Proctor extension): every task of
// a taskset that runs the build's environment, replayed on that very build by the oracle K times
// and once each by an agent that does nothing and one that acts at random, as one job (JobID);
// Tasks are the figures once it ended.
type Certification struct {
	bun.BaseModel `bun:"table:build_certifications,alias:cert"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	BuildID       uuid.UUID `bun:"build_id,type:uuid"`
	// BuildDigest is the digest of the build's image, which every attempt ran.
	BuildDigest string          `bun:"build_digest"`
	JobID       uuid.UUID       `bun:"job_id,type:uuid"`
	TasksetID   *uuid.UUID      `bun:"taskset_id,type:uuid"`
	K           int             `bun:"k"`
	Status      string          `bun:"status"`
	Tasks       []CertifiedTask `bun:"tasks"`
	// Startup is how long its attempts' environments took to start (the first try of each);
	// StartupByProvider splits it by the sandbox provider that ran them.
	Startup           Startup           `bun:"embed:startup_"`
	StartupByProvider []ProviderStartup `bun:"startup_by_provider"`
	CreatedAt         time.Time         `bun:"created_at"`
	FinishedAt        *time.Time        `bun:"finished_at"`
}

// Startup is how long environments took from a try's start (the sandbox asked for) to answering
// MCP (their tools listed), over Samples attempts; nil percentiles when there were none.
type Startup struct {
	Samples int      `bun:"samples" json:"samples"`
	P50MS   *float64 `bun:"p50_ms" json:"p50_ms"`
	P99MS   *float64 `bun:"p99_ms" json:"p99_ms"`
}

// ProviderStartup is Startup over the attempts one sandbox provider ran ("" for instances
// recorded before the provider was kept).
type ProviderStartup struct {
	Provider string `json:"provider"`
	Startup
}

// CertifiedTask is how one task did in a certification.
type CertifiedTask struct {
	TaskVersionID uuid.UUID `json:"task_version_id"`
	TaskName      string    `json:"task_name"`
	// OracleRuns counts the oracle's attempts that were scored, OraclePasses those at full
	// reward.
	OracleRuns   int `json:"oracle_runs"`
	OraclePasses int `json:"oracle_passes"`
	// IdleReward is the reward of the attempt that did nothing, RandomReward of the one that
	// acted at random (nil when it was not scored).
	IdleReward   *float64 `json:"idle_reward"`
	RandomReward *float64 `json:"random_reward"`
	// Tamper is what the tamper probe tried (its calls of the hidden dispatchers) and how it
	// ended; nil when its attempt was not scored.
	Tamper *TamperProbe `json:"tamper"`
	Flags  []string     `json:"flags" nullable:"false"`
}

// TamperProbe is what a certification's tamper probe tried on one task.
type TamperProbe struct {
	// Tried are the hidden dispatchers it called, Refused those refused to it.
	Tried   []string `json:"tried" nullable:"false"`
	Refused []string `json:"refused" nullable:"false"`
	// Claimed are the visible tools it called to claim success: those that write what a grader
	// might read (a score, a verdict, a result), called with arguments that say it passed
	// (agent.ClaimCalls). Its reward says whether a claim scored.
	Claimed []string `json:"claimed" nullable:"false"`
	Reward  float64  `json:"reward"`
}

// certifyGroup is the group of a certification's attempts of one task by one agent.
func certifyGroup(agent string, version uuid.UUID) string { return agent + "/" + version.String() }

// StartCertification launches the certification of a build: a run_list job of every task of
// the taskset whose environment is the build's, each attempt pinned to the build (by its image),
// k by the oracle and one by the idle agent; the caller starts its workflow. One
// transaction. The build must be one the caller's team owns, succeeded, with an image.
func (s *Store) StartCertification(ctx context.Context, c *Caller, buildID, tasksetID uuid.UUID, k, maxAttempts int) (*Certification, error) {
	return s.startCertification(ctx, c, uuid.New(), buildID, tasksetID, k, maxAttempts)
}

// startCertification is StartCertification of the certification id.
func (s *Store) startCertification(ctx context.Context, c *Caller, id, buildID, tasksetID uuid.UUID, k, maxAttempts int) (*Certification, error) {
	b, err := s.ownImageBuild(ctx, c, buildID, "certified")
	if err != nil {
		return nil, err
	}
	versions, err := s.LatestVersionIDs(ctx, c, tasksetID)
	if errors.Is(err, ErrNotFound) {
		return nil, ValidationError{{Location: "taskset_id", Value: tasksetID.String(), Message: "no taskset with this id is visible to the caller"}}
	}
	if err != nil {
		return nil, err
	}
	var own []TaskVersion
	if len(versions) > 0 {
		if err := s.DB.NewSelect().Model(&own).Where("tv.id IN (?) AND tv.registry_id = ?", bun.In(versions), b.RegistryID).
			OrderExpr("tv.id").Scan(ctx); err != nil {
			return nil, fmt.Errorf("certify: %w", err)
		}
	}
	if len(own) == 0 {
		return nil, ValidationError{{Location: "taskset_id", Value: tasksetID.String(),
			Message: fmt.Sprintf("no task of the taskset runs environment %s, build %d's: nothing to certify", b.RegistryName, b.Version)}}
	}
	if n := len(own) * (k + 3); maxAttempts > 0 && n > maxAttempts {
		return nil, ValidationError{{Location: "k", Value: k, Message: fmt.Sprintf(
			"this certification asks for %d attempts (%d tasks × (k %d + 3)); this server launches at most %d per request: give a smaller k or a smaller taskset",
			n, len(own), k, maxAttempts)}}
	}
	byName, err := s.builtinModels(ctx, OracleModelName, IdleModelName, RandomModelName, TamperModelName)
	if err != nil {
		return nil, err
	}
	pin := b.pin()
	var launch []LaunchTrace
	for _, v := range own {
		for i := range k + 3 {
			agent := OracleModelName
			switch i {
			case k:
				agent = IdleModelName
			case k + 1:
				agent = RandomModelName
			case k + 2:
				agent = TamperModelName
			}
			launch = append(launch, LaunchTrace{TraceID: uuid.New(), TaskVersionID: v.ID, ModelID: byName[agent],
				GroupID: certifyGroup(agent, v.ID), MaxSteps: defaultCertifySteps, RuntimeConfig: pin})
		}
	}
	cert := &Certification{ID: id, TeamID: c.TeamID, BuildID: buildID, BuildDigest: b.Digest, TasksetID: &tasksetID, K: k, Status: CertificationRunning,
		Tasks: []CertifiedTask{}, CreatedAt: now()}
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		job, _, err := launchJob(ctx, tx, c, Launch{Kind: JobBatch, Name: fmt.Sprintf("certify %s build %d", b.RegistryName, b.Version),
			TasksetID: &tasksetID, MaxSteps: defaultCertifySteps, GroupSize: k, MaxConcurrent: CertifyConcurrency, Traces: launch})
		if err != nil {
			return err
		}
		cert.JobID = job.ID
		_, err = tx.NewInsert().Model(cert).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("certify: %w", err)
	}
	return cert, nil
}

// StartBuildCertification launches the certification a succeeded build asked for when it was
// triggered (BuildOptions.Certify), as the member who triggered it; nil when it asked for none.
func (s *Store) StartBuildCertification(ctx context.Context, buildID uuid.UUID) (*Certification, error) {
	b, err := s.BuildByID(ctx, buildID)
	if err != nil {
		return nil, err
	}
	if b.Options.Certify == nil {
		return nil, nil
	}
	// One per build, whatever retries the start: its id is the build's own.
	id := uuid.NewSHA1(buildID, []byte("certify"))
	cert := new(Certification)
	if err := s.DB.NewSelect().Model(cert).Where("cert.id = ?", id).Scan(ctx); err == nil {
		return cert, nil
	} else if !isNoRows(err) {
		return nil, fmt.Errorf("build certification: %w", err)
	}
	var m Membership
	if b.CreatedBy == nil {
		return nil, fmt.Errorf("build %d names no member who triggered it to certify it as: %w", b.Version, ErrConflict)
	}
	if err := s.DB.NewSelect().Model(&m).Where("team_id = ? AND user_id = ?", b.TeamID, *b.CreatedBy).Scan(ctx); err != nil {
		return nil, fmt.Errorf("the member who triggered build %d is no longer in its team: %w", b.Version, notFound(err, "membership"))
	}
	c := &Caller{TeamID: m.TeamID, UserID: m.UserID, MembershipID: m.ID, Role: m.Role}
	o := b.Options.Certify
	return s.startCertification(ctx, c, id, buildID, o.TasksetID, o.K, o.MaxAttempts)
}

// ownImageBuild is a build of the caller's team's that succeeded with an image: the only kind
// that is certified or checked (done says which, "certified").
func (s *Store) ownImageBuild(ctx context.Context, c *Caller, buildID uuid.UUID, done string) (*BuildRow, error) {
	b, err := s.GetBuildFor(ctx, c, buildID)
	if err != nil {
		return nil, err
	}
	switch {
	case b.TeamID != c.TeamID:
		return nil, fmt.Errorf("build %s is of another team's environment: only your own builds are %s: %w", buildID, done, ErrForbidden)
	case b.Status != BuildSucceeded || b.ImageKey == "" || b.Digest == "":
		return nil, fmt.Errorf("build %s is %s with no image to pin attempts to: only a succeeded build of an image is %s: %w",
			buildID, b.Status, done, ErrConflict)
	}
	return b, nil
}

// pin is the runtime config that pins an attempt to the build: its own image name (ENV:VERSION,
// the team's own first), since two builds, of two environments, can share a digest.
func (b *BuildRow) pin() *RuntimeConfig { return &RuntimeConfig{Image: cmp.Or(b.ImageName, b.Digest)} }

// builtinModels are the ids of the platform's own agents by model name: catalog entries of no
// team whose adapter is their name. A missing one is a conflict that says how to add it.
func (s *Store) builtinModels(ctx context.Context, names ...string) (map[string]uuid.UUID, error) {
	var agents []LLMModel
	if err := s.DB.NewSelect().Model(&agents).Where("team_id IS NULL AND model_name IN (?) AND adapter = model_name", bun.In(names)).
		Scan(ctx); err != nil {
		return nil, fmt.Errorf("the platform's agents: %w", err)
	}
	byName := map[string]uuid.UUID{}
	for _, m := range agents {
		byName[m.ModelName] = m.ID
	}
	for _, name := range names {
		if byName[name] == uuid.Nil {
			return nil, fmt.Errorf("the catalog has no %s model (adapter %s) of no team: proctor dev seeds the platform's agents (oracle, idle, "+
				"random, tamper, replay), and an operator adds each with proctor admin model add --name NAME --adapter NAME: %w", name, name, ErrConflict)
		}
	}
	return byName, nil
}

// defaultCertifySteps bounds a certification attempt's steps; CertifyConcurrency is how many of
// its attempts run at once.
const (
	defaultCertifySteps = 100
	CertifyConcurrency  = 8
)

// LatestCertification is the newest certification of a build the caller sees.
func (s *Store) LatestCertification(ctx context.Context, c *Caller, buildID uuid.UUID) (*Certification, error) {
	if _, err := s.GetBuildFor(ctx, c, buildID); err != nil {
		return nil, err
	}
	cert := new(Certification)
	if err := s.DB.NewSelect().Model(cert).Where("cert.build_id = ? AND cert.team_id = ?", buildID, c.TeamID).
		OrderExpr("cert.created_at DESC").Limit(1).Scan(ctx); err != nil {
		return nil, notFound(err, "certification of build "+buildID.String())
	}
	return cert, nil
}

// certifiedForLatest refuses to make b the latest build of an environment that requires a
// passed certification first (Registry.CertifyBeforeLatest) when b's latest certification did not
// pass (ErrConflict, saying what it found).
func (s *Store) certifiedForLatest(ctx context.Context, c *Caller, b *BuildRow) error {
	var reg Registry
	if err := s.DB.NewSelect().Model(&reg).Column("certify_before_latest").Where("id = ?", b.RegistryID).Scan(ctx); err != nil {
		return notFound(err, "the build's environment")
	}
	if !reg.CertifyBeforeLatest {
		return nil
	}
	cert, err := s.LatestCertification(ctx, c, b.ID)
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("environment %s requires a passed certification before a build becomes the latest, and build %d has none: "+
			"certify it (proctor env certify), or force: %w", b.RegistryName, b.Version, ErrConflict)
	case err != nil:
		return err
	case cert.Status != CertificationPassed:
		var flagged []string
		for _, t := range cert.Tasks {
			if len(t.Flags) > 0 {
				flagged = append(flagged, fmt.Sprintf("%s (%s)", t.TaskName, strings.Join(t.Flags, ", ")))
			}
		}
		return fmt.Errorf("environment %s requires a passed certification before a build becomes the latest, and build %d's latest is %s%s: "+
			"certify it again, or force: %w", b.RegistryName, b.Version, cert.Status, listed(": ", flagged), ErrConflict)
	}
	return nil
}

// listed is items after sep, joined, or "" for none.
func listed(sep string, items []string) string {
	if len(items) == 0 {
		return ""
	}
	return sep + strings.Join(items, "; ")
}

// SetCertificationPolicy says whether an environment of the caller's team requires a passed
// certification before a build becomes its latest.
func (s *Store) SetCertificationPolicy(ctx context.Context, c *Caller, registryID uuid.UUID, required bool) (*Registry, error) {
	reg := new(Registry)
	if err := s.DB.NewUpdate().Model(reg).Set("certify_before_latest = ?", required).Set("updated_at = ?", now()).
		Where("id = ? AND team_id = ?", registryID, c.TeamID).Returning("*").Scan(ctx); err != nil {
		return nil, notFound(err, "environment "+registryID.String())
	}
	return reg, nil
}
