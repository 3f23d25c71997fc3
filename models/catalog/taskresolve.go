package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

// resolvedTask is an upload task after its environment and scenario were looked up.
type resolvedTask struct {
	TaskUpload
	registryID *uuid.UUID
	hash       string
}

// resolveUpload validates every task and looks up environments and scenarios before any write.
func (s *Store) resolveUpload(ctx context.Context, c *models.Caller, up Upload) ([]resolvedTask, error) {
	r := &uploadResolver{s: s, c: c, envs: map[string]*registry.RegistryRow{}}
	if up.TasksetID == nil && strings.TrimSpace(up.TasksetName) == "" {
		r.bad("taskset_name", "taskset_name or taskset_id is required", nil)
	}
	if up.RegistryID != nil {
		env, err := registry.Of(s.Store).GetRegistry(ctx, c, *up.RegistryID)
		if err != nil {
			r.bad("registry_id", "no environment with this id is visible to the caller", up.RegistryID.String())
		}
		r.defaultEnv = env
	}
	names := map[string]int{}
	out := make([]resolvedTask, len(up.Tasks))
	for i, t := range up.Tasks {
		loc := fmt.Sprintf("tasks[%d]", i)
		t.Name = strings.TrimSpace(t.Name)
		if t.Name == "" {
			r.bad(loc+".name", "name is required", t.Name)
		} else if j, dup := names[t.Name]; dup {
			r.bad(loc+".name", fmt.Sprintf("tasks[%d] has the same name", j), t.Name)
		} else {
			names[t.Name] = i
		}
		rt, err := r.task(ctx, loc, t)
		if err != nil {
			return nil, err
		}
		out[i] = rt
	}
	if len(r.verr) > 0 {
		return nil, r.verr
	}
	return out, nil
}

// uploadResolver resolves the tasks of one upload, collecting every invalid field.
type uploadResolver struct {
	s          *Store
	c          *models.Caller
	defaultEnv *registry.RegistryRow
	// envs are the environments named so far, by name.
	envs map[string]*registry.RegistryRow
	verr models.ValidationError
}

func (r *uploadResolver) bad(loc, msg string, v any) {
	r.verr = append(r.verr, models.FieldError{Location: loc, Message: msg, Value: v})
}

// task resolves one task at loc: its environment, its scenario (whose args_schema its args must
// match) and the checks of its own fields; an error is the store's, not the task's.
func (r *uploadResolver) task(ctx context.Context, loc string, t TaskUpload) (resolvedTask, error) {
	if t.TaskID != "" {
		if _, err := uuid.Parse(t.TaskID); err != nil {
			r.bad(loc+".task_id", "task_id must be a task's uuid", t.TaskID)
		}
	}
	env, err := r.env(ctx, loc, t.Env)
	if err != nil {
		return resolvedTask{}, err
	}
	rt := resolvedTask{TaskUpload: t}
	if env != nil {
		rt.registryID = &env.ID
		if t.Env == "" {
			rt.Env = env.Name
		}
	}
	scenario, err := r.scenario(ctx, loc, &rt, env)
	if err != nil {
		return resolvedTask{}, err
	}
	if scenario != nil {
		// Arguments the scenario cannot take are found here, not by a job of errored attempts.
		for _, v := range models.ArgsViolations(scenario.ArgsSchema, t.Args) {
			where := loc + ".args"
			if v.Location != "" {
				where += "." + v.Location
				if strings.HasPrefix(v.Location, "[") {
					where = loc + ".args" + v.Location
				}
			}
			r.bad(where, fmt.Sprintf("does not match the args_schema of scenario %q: %s", scenario.Name, v.Message), nil)
		}
	}
	if rt.Scenario == "" && strings.TrimSpace(t.Prompt) == "" {
		r.bad(loc+".prompt", "a task without a scenario needs a prompt", nil)
	}
	for j, call := range t.Validation {
		if strings.TrimSpace(call.Name) == "" {
			r.bad(fmt.Sprintf("%s.validation[%d].name", loc, j), "each validation call names the tool it calls", call.Name)
		}
	}
	r.verr = append(r.verr, t.AgentConfig.Check(loc+".agent_config")...)
	rt.Keywords = r.keywords(loc, t.Keywords)
	if t.Metadata != nil {
		if b, err := json.Marshal(t.Metadata); err != nil {
			r.bad(loc+".metadata", fmt.Sprintf("the metadata of task %q is not JSON: %v", t.Name, err), nil)
		} else if len(b) > MaxTaskMetadataBytes {
			r.bad(loc+".metadata", fmt.Sprintf("the metadata of task %q is %d bytes as JSON, over the %d (64 KiB) a task's metadata may hold", t.Name, len(b), MaxTaskMetadataBytes), nil)
		}
	}
	if rt.Args == nil {
		rt.Args = map[string]any{}
	}
	if rt.Validation == nil {
		rt.Validation = []models.ValidationCall{}
	}
	if rt.Metadata == nil {
		rt.Metadata = map[string]any{}
	}
	rt.hash = rt.TaskContent.Hash(rt.registryID, rt.ScenarioID)
	return rt, nil
}

// MaxTaskMetadataBytes bounds a task version's metadata, as JSON: facts about a task, not its
// files.
const MaxTaskMetadataBytes = 64 << 10

// keywords are a task's keywords as a version keeps them: each trimmed, and a repeat (ignoring
// case: the listing's keyword filter ignores it too) kept once, at its first place. A blank one is
// refused.
func (r *uploadResolver) keywords(loc string, in []string) []string {
	out := make([]string, 0, len(in))
	seen := make(map[string]bool, len(in))
	for j, k := range in {
		k = strings.TrimSpace(k)
		if k == "" {
			r.bad(fmt.Sprintf("%s.keywords[%d]", loc, j), "a keyword is not blank", in[j])
			continue
		}
		if folded := strings.ToLower(k); !seen[folded] {
			seen[folded] = true
			out = append(out, k)
		}
	}
	return out
}

// env is the environment a task names (looked up once an upload), else the upload's.
func (r *uploadResolver) env(ctx context.Context, loc, name string) (*registry.RegistryRow, error) {
	if name == "" {
		return r.defaultEnv, nil
	}
	if env, ok := r.envs[name]; ok {
		return env, nil
	}
	env, err := registry.Of(r.s.Store).FindRegistry(ctx, r.c, name)
	switch {
	case err == nil:
		r.envs[name] = env
		return env, nil
	case errors.Is(err, models.ErrNotFound):
		r.bad(loc+".env", fmt.Sprintf("no environment %q is visible to the caller", name), name)
		return nil, nil
	default:
		return nil, err
	}
}

// scenario is the scenario a task runs, by id or by name in its environment's latest build,
// recorded in rt; nil for a task without one, or whose scenario is not found (that is recorded
// as an invalid field).
func (r *uploadResolver) scenario(ctx context.Context, loc string, rt *resolvedTask, env *registry.RegistryRow) (*models.Scenario, error) {
	var sc models.Scenario
	switch {
	case rt.ScenarioID != nil:
		err := r.s.DB.NewSelect().Model(&sc).Where("id = ?", *rt.ScenarioID).Scan(ctx)
		switch {
		case err != nil && !models.IsNoRows(err):
			return nil, err
		case err != nil || (env != nil && sc.RegistryID != env.ID):
			r.bad(loc+".scenario_id", "no such scenario in the task's environment", rt.ScenarioID.String())
			return nil, nil
		case rt.Scenario == "":
			rt.Scenario = sc.Name
		}
		return &sc, nil
	case rt.Scenario != "" && env != nil && env.LatestBuildID != nil:
		err := r.s.DB.NewSelect().Model(&sc).Where("build_id = ? AND name = ?", *env.LatestBuildID, rt.Scenario).Scan(ctx)
		if models.IsNoRows(err) {
			r.bad(loc+".scenario", fmt.Sprintf("environment %q declares no scenario %q in its latest build", env.Name, rt.Scenario), rt.Scenario)
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		rt.ScenarioID = &sc.ID
		return &sc, nil
	case rt.Scenario != "" && env == nil && rt.Env == "":
		r.bad(loc+".env", fmt.Sprintf("scenario %q needs the environment that declares it: set env (or the upload's registry_id)", rt.Scenario), nil)
	}
	return nil, nil
}
