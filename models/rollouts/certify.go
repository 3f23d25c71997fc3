package rollouts

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/uptrace/bun"
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
	// FlagTaskFault: some of the task's attempts ended in error because its own evaluation said
	// the task is broken (envserver.TaskFault: a Harbor verifier that wrote no reward, or two).
	FlagTaskFault = "task_fault"
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

// certifyGroup is the group of a certification's attempts of one task by one agent.
func certifyGroup(agent string, version uuid.UUID) string { return agent + "/" + version.String() }

// StartCertification launches the certification of a build: a run_list job of every task of
// the taskset whose environment is the build's, each attempt pinned to the build (by its image),
// k by the oracle and one by the idle agent; the caller starts its workflow. One
// transaction. The build must be one the caller's team owns, succeeded, with an image.
func (s *Store) StartCertification(ctx context.Context, c *models.Caller, buildID, tasksetID uuid.UUID, k, maxAttempts int) (*models.Certification, error) {
	return s.startCertification(ctx, c, uuid.New(), buildID, tasksetID, k, maxAttempts)
}

// startCertification is StartCertification of the certification id.
func (s *Store) startCertification(ctx context.Context, c *models.Caller, id, buildID, tasksetID uuid.UUID, k, maxAttempts int) (*models.Certification, error) {
	b, err := s.ownImageBuild(ctx, c, buildID, "certified")
	if err != nil {
		return nil, err
	}
	versions, err := catalog.Of(s.Store).LatestVersionIDs(ctx, c, tasksetID)
	if errors.Is(err, models.ErrNotFound) {
		return nil, models.ValidationError{{Location: "taskset_id", Value: tasksetID.String(), Message: "no taskset with this id is visible to the caller"}}
	}
	if err != nil {
		return nil, err
	}
	var own []models.TaskVersion
	if len(versions) > 0 {
		if err := s.DB.NewSelect().Model(&own).Where("tv.id IN (?) AND tv.registry_id = ?", bun.In(versions), b.RegistryID).
			OrderExpr("tv.id").Scan(ctx); err != nil {
			return nil, fmt.Errorf("certify: %w", err)
		}
	}
	if len(own) == 0 {
		return nil, models.ValidationError{{Location: "taskset_id", Value: tasksetID.String(),
			Message: fmt.Sprintf("no task of the taskset runs environment %s, build %d's: nothing to certify", b.RegistryName, b.Version)}}
	}
	if n := len(own) * (k + 3); maxAttempts > 0 && n > maxAttempts {
		return nil, models.ValidationError{{Location: "k", Value: k, Message: fmt.Sprintf(
			"this certification asks for %d attempts (%d tasks × (k %d + 3)); this server launches at most %d per request: give a smaller k or a smaller taskset",
			n, len(own), k, maxAttempts)}}
	}
	byName, err := s.builtinModels(ctx, OracleModelName, IdleModelName, RandomModelName, TamperModelName)
	if err != nil {
		return nil, err
	}
	pin := b.Pin()
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
	cert := &models.Certification{ID: id, TeamID: c.TeamID, BuildID: buildID, BuildDigest: b.Digest, TasksetID: &tasksetID, K: k, Status: models.CertificationRunning,
		Tasks: []models.CertifiedTask{}, CreatedAt: models.Now()}
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		job, _, err := launchJob(ctx, tx, c, Launch{Kind: models.JobBatch, Name: fmt.Sprintf("certify %s build %d", b.RegistryName, b.Version),
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
func (s *Store) StartBuildCertification(ctx context.Context, buildID uuid.UUID) (*models.Certification, error) {
	b, err := registry.Of(s.Store).BuildByID(ctx, buildID)
	if err != nil {
		return nil, err
	}
	if b.Options.Certify == nil {
		return nil, nil
	}
	// One per build, whatever retries the start: its id is the build's own.
	id := uuid.NewSHA1(buildID, []byte("certify"))
	cert := new(models.Certification)
	if err := s.DB.NewSelect().Model(cert).Where("cert.id = ?", id).Scan(ctx); err == nil {
		return cert, nil
	} else if !models.IsNoRows(err) {
		return nil, fmt.Errorf("build certification: %w", err)
	}
	var m models.Membership
	if b.CreatedBy == nil {
		return nil, fmt.Errorf("build %d names no member who triggered it to certify it as: %w", b.Version, models.ErrConflict)
	}
	if err := s.DB.NewSelect().Model(&m).Where("team_id = ? AND user_id = ?", b.TeamID, *b.CreatedBy).Scan(ctx); err != nil {
		return nil, fmt.Errorf("the member who triggered build %d is no longer in its team: %w", b.Version, models.NotFound(err, "membership"))
	}
	c := &models.Caller{TeamID: m.TeamID, UserID: m.UserID, MembershipID: m.ID, Role: m.Role}
	o := b.Options.Certify
	return s.startCertification(ctx, c, id, buildID, o.TasksetID, o.K, o.MaxAttempts)
}

// ownImageBuild is a build of the caller's team's that succeeded with an image: the only kind
// that is certified or checked (done says which, "certified").
func (s *Store) ownImageBuild(ctx context.Context, c *models.Caller, buildID uuid.UUID, done string) (*models.BuildRow, error) {
	b, err := registry.Of(s.Store).GetBuildFor(ctx, c, buildID)
	if err != nil {
		return nil, err
	}
	switch {
	case b.TeamID != c.TeamID:
		return nil, fmt.Errorf("build %s is of another team's environment: only your own builds are %s: %w", buildID, done, models.ErrForbidden)
	case b.Status != registry.BuildSucceeded || b.ImageKey == "" || b.Digest == "":
		return nil, fmt.Errorf("build %s is %s with no image to pin attempts to: only a succeeded build of an image is %s: %w",
			buildID, b.Status, done, models.ErrConflict)
	}
	return b, nil
}

// builtinModels are the ids of the platform's own agents by model name: catalog entries of no
// team whose adapter is their name. A missing one is a conflict that says how to add it.
func (s *Store) builtinModels(ctx context.Context, names ...string) (map[string]uuid.UUID, error) {
	var agents []models.LLMModel
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
				"random, tamper, replay), and an operator adds each with proctor admin model add --name NAME --adapter NAME: %w", name, name, models.ErrConflict)
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
