package models

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Run is everything the engine needs to run one attempt, read in LoadRun: the trace, its task
// version, the build its sandbox runs, the model it calls and who launched it.
type Run struct {
	Trace   Trace
	Version TaskVersion
	// Build is the environment's latest build, or the one the runtime config's image names; nil
	// for a task without an environment, or one whose environment has no build yet.
	Build *Build
	// Model is the trace's model; nil when it names none.
	Model *LLMModel
	// LaunchedBy is the member who launched the attempt's job, and LaunchKey the API key used
	// (nil when a session did); nil both when unknown.
	LaunchedBy, LaunchKey *uuid.UUID
}

// RunImageError is LoadRun's error when the runtime config names an image that is no succeeded
// build the trace's team can run.
type RunImageError struct{ Ref string }

func (e *RunImageError) Error() string {
	return fmt.Sprintf("runtime_config.image %q is no succeeded build this team can run (name one as <environment>:<version>, or by its digest)", e.Ref)
}

// ErrNoTaskVersion is wrapped by LoadRun's error for a trace without a task version.
var ErrNoTaskVersion = errors.New("the trace has no task version")

// LoadRun reads an attempt's Run in four queries at most: the trace with its job's launcher,
// the task version with its environment's latest build id, that build (or the one the runtime
// config's image names), and the model.
func (s *Store) LoadRun(ctx context.Context, traceID uuid.UUID) (*Run, error) {
	var tr struct {
		Trace     `bun:",extend"`
		LaunchBy  *uuid.UUID `bun:"launch_by,scanonly"`
		LaunchKey *uuid.UUID `bun:"launch_key,scanonly"`
	}
	err := s.DB.NewSelect().Model(&tr).ColumnExpr("tr.*").
		ColumnExpr("j.created_by AS launch_by").ColumnExpr("j.api_key_id AS launch_key").
		Join("LEFT JOIN jobs AS j ON j.id = tr.job_id").Where("tr.id = ?", traceID).Scan(ctx)
	if err != nil {
		return nil, notFound(err, "load trace "+traceID.String())
	}
	r := &Run{Trace: tr.Trace, LaunchedBy: tr.LaunchBy, LaunchKey: tr.LaunchKey}
	if r.Trace.TaskVersionID == nil {
		return nil, fmt.Errorf("trace %s: %w", traceID, ErrNoTaskVersion)
	}
	var v struct {
		TaskVersion `bun:",extend"`
		LatestBuild *uuid.UUID `bun:"latest_build,scanonly"`
	}
	err = s.DB.NewSelect().Model(&v).ColumnExpr("tv.*").ColumnExpr("r.latest_build_id AS latest_build").
		Join("LEFT JOIN registries AS r ON r.id = tv.registry_id").Where("tv.id = ?", *r.Trace.TaskVersionID).Scan(ctx)
	if err != nil {
		return nil, notFound(err, "load task version")
	}
	r.Version = v.TaskVersion
	switch ref := r.Trace.RuntimeConfig.Image; {
	case ref != "":
		// A runtime config that names an image runs that build instead of the latest.
		b, err := s.BuildByImage(ctx, r.Trace.TeamID, ref)
		if errors.Is(err, ErrNotFound) {
			return nil, &RunImageError{Ref: ref}
		}
		if err != nil {
			return nil, err
		}
		r.Build = b
	case v.LatestBuild != nil:
		r.Build = new(Build)
		if err := s.DB.NewSelect().Model(r.Build).Where("id = ?", *v.LatestBuild).Scan(ctx); err != nil {
			return nil, notFound(err, "load build")
		}
	}
	if r.Trace.ModelID != nil {
		r.Model = new(LLMModel)
		if err := s.DB.NewSelect().Model(r.Model).Where("id = ?", *r.Trace.ModelID).Scan(ctx); err != nil {
			return nil, notFound(err, "load model")
		}
	}
	return r, nil
}
