package rollouts

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

// Run is everything the engine needs to run one attempt, read in LoadRun: the trace, its task
// version, the build its sandbox runs, the model it calls and who launched it.
type Run struct {
	Trace   models.Trace
	Version models.TaskVersion
	// Build is the environment's latest build, or the one the runtime config's image names; nil
	// for a task without an environment, or one whose environment has no build yet.
	Build *models.Build
	// Model is the trace's model; nil when it names none.
	Model *models.LLMModel
	// Agent is the brought agent's build the attempt runs; nil for the built-in agent loop.
	Agent *models.Build
	// LaunchedBy is the member who launched the attempt's job, and LaunchKey the API key used
	// (nil when a session did); nil both when unknown.
	LaunchedBy, LaunchKey *uuid.UUID
	// Budgeted: the job has a max_cost_usd, which each model call checks (TraceBudget). A job
	// launched without one never gets one.
	Budgeted bool
	// TimeoutMultiplier scales the attempt's times (its job's metadata.timeout_multiplier; 1 when
	// it names none).
	TimeoutMultiplier float64
}

// RunImageError is LoadRun's error when the runtime config names an image that is no succeeded
// build the trace's team can run.
type RunImageError struct{ Ref string }

func (e *RunImageError) Error() string {
	return fmt.Sprintf("runtime_config.image %q is no succeeded build this team can run (name one as <environment>:<version>, or by its digest)", e.Ref)
}

// ErrNoTaskVersion is wrapped by LoadRun's error for a trace without a task version.
var ErrNoTaskVersion = errors.New("the trace has no task version")

// LoadRun reads an attempt's Run in one query: the trace with its job's launcher and metadata, its task
// version, its environment's latest build and its model. A runtime config that names an image
// runs that build instead of the latest, read by a second query.
func (s *Store) LoadRun(ctx context.Context, traceID uuid.UUID) (*Run, error) {
	var row struct {
		models.Trace `bun:",extend"`
		LaunchBy     *uuid.UUID          `bun:"launch_by,scanonly"`
		LaunchKey    *uuid.UUID          `bun:"launch_key,scanonly"`
		Budgeted     bool                `bun:"budgeted,scanonly"`
		JobMetadata  *models.JobMetadata `bun:"job_metadata,scanonly"`
		Version      models.TaskVersion  `bun:"embed:tv__"`
		Build        models.Build        `bun:"embed:b__"`
		Model        models.LLMModel     `bun:"embed:m__"`
	}
	err := s.DB.NewSelect().Model(&row).ColumnExpr("tr.*").
		ColumnExpr("j.created_by AS launch_by").ColumnExpr("j.api_key_id AS launch_key").ColumnExpr("j.max_cost_usd IS NOT NULL AS budgeted").ColumnExpr("j.metadata AS job_metadata").
		ColumnExpr(s.columnsAs((*models.TaskVersion)(nil), "tv", "tv__")).
		ColumnExpr(s.columnsAs((*models.Build)(nil), "b", "b__")).
		ColumnExpr(s.columnsAs((*models.LLMModel)(nil), "m", "m__")).
		Join("LEFT JOIN jobs AS j ON j.id = tr.job_id").
		Join("LEFT JOIN task_versions AS tv ON tv.id = tr.task_version_id").
		Join("LEFT JOIN registries AS r ON r.id = tv.registry_id").
		Join("LEFT JOIN builds AS b ON b.id = r.latest_build_id").
		Join("LEFT JOIN llm_models AS m ON m.id = tr.model_id").
		Where("tr.id = ?", traceID).Scan(ctx)
	if err != nil {
		return nil, models.NotFound(err, "load trace "+traceID.String())
	}
	r := &Run{Trace: row.Trace, LaunchedBy: row.LaunchBy, LaunchKey: row.LaunchKey, Budgeted: row.Budgeted, TimeoutMultiplier: 1}
	if md := row.JobMetadata; md != nil && md.TimeoutMultiplier > 0 {
		r.TimeoutMultiplier = md.TimeoutMultiplier
	}
	if r.Trace.TaskVersionID == nil {
		return nil, fmt.Errorf("trace %s: %w", traceID, ErrNoTaskVersion)
	}
	if row.Version.ID == uuid.Nil {
		return nil, fmt.Errorf("load task version: %w", models.ErrNotFound)
	}
	r.Version = row.Version
	switch ref := r.Trace.RuntimeConfig.Image; {
	case ref != "":
		b, err := registry.Of(s.Store).BuildByImage(ctx, r.Trace.TeamID, ref)
		if errors.Is(err, models.ErrNotFound) {
			return nil, &RunImageError{Ref: ref}
		}
		if err != nil {
			return nil, err
		}
		r.Build = b
	case row.Build.ID != uuid.Nil:
		r.Build = &row.Build
	}
	if id := r.Trace.AgentBuildID; id != nil {
		b, err := registry.Of(s.Store).BuildByID(ctx, *id)
		if err != nil {
			return nil, fmt.Errorf("the attempt's agent: %w", err)
		}
		r.Agent = b
	}
	if r.Trace.ModelID != nil {
		if row.Model.ID == uuid.Nil {
			return nil, fmt.Errorf("load model: %w", models.ErrNotFound)
		}
		r.Model = &row.Model
	}
	return r, nil
}

// columnsAs selects the columns of model's table under alias, each named with prefix (for a
// struct field tagged embed:prefix).
func (s *Store) columnsAs(model any, alias, prefix string) string {
	t := s.DB.Table(reflect.TypeOf(model))
	cols := make([]string, 0, len(t.Fields))
	for _, f := range t.Fields {
		cols = append(cols, fmt.Sprintf("%s.%s AS %s%s", alias, f.SQLName, prefix, f.Name))
	}
	return strings.Join(cols, ", ")
}
