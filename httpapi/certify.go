package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// Certification is a certification of an environment build (a Proctor extension).
type Certification struct {
	ID          uuid.UUID              `json:"id"`
	BuildID     uuid.UUID              `json:"build_id"`
	BuildDigest string                 `json:"build_digest" doc:"the digest of the build's image, which every attempt of the certification ran"`
	JobID       uuid.UUID              `json:"job_id" doc:"the job that runs its attempts: follow, cancel or export it as any job"`
	TasksetID   *uuid.UUID             `json:"taskset_id"`
	K           int                    `json:"k" doc:"the oracle's attempts per task"`
	Status      string                 `json:"status" enum:"running,passed,flagged,failed" doc:"running while its job runs; passed: no task flagged; flagged: some task is; failed: its job was cancelled"`
	Tasks       []models.CertifiedTask `json:"tasks" nullable:"false" doc:"per task, once its job has ended: the oracle's scored runs and full-reward passes, the idle and random agents' rewards, and its flags: oracle_fails (the oracle never reached full reward), flaky (it did on some runs, not all), passes_without_work (the idle agent, which makes no tool call, or the random one, which calls tools with random arguments, reached full reward), tamperable (the tamper probe's call of the hidden setup or evaluate dispatcher was not refused, or it reached full reward where doing nothing did not: it also claims success through each visible tool that writes what a grader might read, a score, a verdict, a result), unfinished (some attempt was not scored), task_fault (some attempt ended in error because the task's own evaluation said the task is broken: a Harbor verifier that wrote no reward, or two); tamper says what the probe tried, what was refused and which visible tools it claimed success through"`
	Startup     models.Startup         `json:"startup" doc:"how long its attempts' environments took from their try's start (the sandbox asked for) to answering MCP with their tools listed, over samples attempts (first tries), in ms; null percentiles before any"`
	// StartupByProvider splits Startup by sandbox provider.
	StartupByProvider []models.ProviderStartup `json:"startup_by_provider" nullable:"false" doc:"startup per sandbox provider that ran the attempts (process, container, kubernetes; empty for sandboxes recorded before the provider was kept), by name"`
	CreatedAt         time.Time                `json:"created_at"`
	FinishedAt        *time.Time               `json:"finished_at"`
}

func certificationFrom(c *models.Certification) Certification {
	tasks := nonNilSlice(c.Tasks)
	for i := range tasks {
		// Recorded before the probe claimed success through visible tools.
		if p := tasks[i].Tamper; p != nil {
			p.Claimed = nonNilSlice(p.Claimed)
		}
	}
	return Certification{ID: c.ID, BuildID: c.BuildID, BuildDigest: c.BuildDigest, JobID: c.JobID, TasksetID: c.TasksetID, K: c.K, Status: c.Status, Tasks: tasks,
		Startup: c.Startup, StartupByProvider: nonNilSlice(c.StartupByProvider), CreatedAt: c.CreatedAt, FinishedAt: c.FinishedAt}
}

type certificationOutput struct{ Body Certification }

// registerCertify registers the certification of builds.
func (s *Server) registerCertify() {
	tags := []string{"Builds"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "certify-build", Method: http.MethodPost, Path: "/builds/{build_id}/certify", Tags: tags,
		Summary: "Certify a build: is it measuring what it claims? (Proctor extension)",
		Description: "Runs every task of the taskset whose environment is the build's on that very build (its attempts pinned to its image): " +
			"the oracle (the task's own validation calls) k times, and once each an idle agent that makes no tool call, a random agent " +
			"that calls tools with random arguments their schemas allow, and a tamper probe that calls the hidden setup and evaluate dispatchers, then claims success " +
			"through up to 8 visible tools whose name or arguments say score, reward, grade, verdict, evaluat(e/ion), result, passed, success, correct or solved " +
			"(and through a tool that runs shell commands, by planting Harbor's reward files in /logs/verifier), as one job. " +
			"Once the job has ended, each task is flagged when the oracle never reaches full reward (oracle_fails), reaches it on some " +
			"runs only (flaky), when the idle or the random agent reaches it (passes_without_work), or when a hidden dispatcher answers the tamper " +
			"probe or it reaches full reward where the idle agent does not (tamperable), and when an attempt ends in a task fault (task_fault). 404 for a build that is not the caller's team's (as for one that does not exist); 403 when the caller's spending limit is reached; 409 for a build " +
			"that did not succeed or has no image; 422 for a taskset with no task of the build's environment.",
		DefaultStatus: http.StatusAccepted,
		Errors:        []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.certifyBuild)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-build-certification", Method: http.MethodGet, Path: "/builds/{build_id}/certification", Tags: tags,
		Summary: "A build's latest certification (Proctor extension)", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getBuildCertification)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "set-certification-policy", Method: http.MethodPut, Path: "/registry/{registry_id}/certification-policy", Tags: []string{"Registries"},
		Summary: "Require a passed certification before a build becomes the latest (Proctor extension)",
		Description: "Off by default. On, POST /v2/builds/{build_id}/set-latest refuses (409) a build of this environment whose latest " +
			"certification did not pass (or that has none), unless its body says force.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession)), s.setCertificationPolicy)
}

// CertificationPolicy is whether an environment requires a passed certification before a build
// becomes its latest.
type CertificationPolicy struct {
	RegistryID          uuid.UUID `json:"registry_id"`
	CertifyBeforeLatest bool      `json:"certify_before_latest"`
}

type certificationPolicyInput struct {
	RegistryID uuid.UUID `path:"registry_id"`
	Body       struct {
		CertifyBeforeLatest bool `json:"certify_before_latest" required:"true" doc:"true: set-latest refuses a build whose latest certification did not pass, unless forced"`
	}
}

type certificationPolicyOutput struct{ Body CertificationPolicy }

// setCertificationPolicy serves PUT /v2/registry/{registry_id}/certification-policy.
func (s *Server) setCertificationPolicy(ctx context.Context, in *certificationPolicyInput) (*certificationPolicyOutput, error) {
	reg, err := s.registry.SetCertificationPolicy(ctx, callerFrom(ctx), in.RegistryID, in.Body.CertifyBeforeLatest)
	if err != nil {
		return nil, storeError(err, "environment")
	}
	return &certificationPolicyOutput{Body: CertificationPolicy{RegistryID: reg.ID, CertifyBeforeLatest: reg.CertifyBeforeLatest}}, nil
}

type certifyBuildInput struct {
	BuildID uuid.UUID `path:"build_id"`
	Body    struct {
		TasksetID uuid.UUID `json:"taskset_id" doc:"the taskset whose tasks of the build's environment are certified"`
		K         int       `json:"k,omitempty" minimum:"1" maximum:"20" default:"5" doc:"the oracle's attempts per task"`
	}
}

// Resolve refuses the nil UUID as the taskset.
func (in *certifyBuildInput) Resolve(huma.Context) []error {
	return nilIDs(map[string]*uuid.UUID{"body.taskset_id": &in.Body.TasksetID})
}

// certifyBuild serves POST /v2/builds/{build_id}/certify.
func (s *Server) certifyBuild(ctx context.Context, in *certifyBuildInput) (*certificationOutput, error) {
	if err := s.canLaunch(ctx); err != nil {
		return nil, err
	}
	cert, err := s.rollouts.StartCertification(ctx, callerFrom(ctx), in.BuildID, in.Body.TasksetID, in.Body.K, s.maxAttempts)
	if err != nil {
		return nil, storeError(err, "build")
	}
	if err := s.workflows.StartCertification(ctx, cert.ID, cert.JobID, rollouts.CertifyConcurrency); err != nil {
		return nil, s.notStarted(ctx, "the certification", cert.ID, err)
	}
	return &certificationOutput{Body: certificationFrom(cert)}, nil
}

// getBuildCertification serves GET /v2/builds/{build_id}/certification.
func (s *Server) getBuildCertification(ctx context.Context, in *buildPath) (*certificationOutput, error) {
	cert, err := s.registry.LatestCertification(ctx, callerFrom(ctx), in.BuildID)
	if err != nil {
		return nil, storeError(err, "certification")
	}
	return &certificationOutput{Body: certificationFrom(cert)}, nil
}
