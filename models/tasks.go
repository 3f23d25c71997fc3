package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Task is the stable identity of one graded request in a taskset: its name, external id and review
// state. Its content lives in immutable versions.
type Task struct {
	bun.BaseModel   `bun:"table:tasks,alias:tk"`
	ID              uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID          uuid.UUID  `bun:"team_id,type:uuid"`
	TasksetID       uuid.UUID  `bun:"taskset_id,type:uuid"`
	Name            string     `bun:"name"`
	ExternalID      *string    `bun:"external_id"`
	Status          string     `bun:"status"`
	Stage           *string    `bun:"stage"`
	LatestVersionID *uuid.UUID `bun:"latest_version_id,type:uuid"`
	VersionCount    int        `bun:"version_count"`
	CreatedAt       time.Time  `bun:"created_at"`
	UpdatedAt       time.Time  `bun:"updated_at"`
}

// Task review statuses.
const (
	TaskPending  = "pending"
	TaskReady    = "ready"
	TaskVerified = "verified"
	TaskRevision = "revision"
	TaskRejected = "rejected"
)

// TaskVersion is one immutable content of a task; rollouts refer to its id.
type TaskVersion struct {
	bun.BaseModel `bun:"table:task_versions,alias:tv"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	TaskID        uuid.UUID  `bun:"task_id,type:uuid"`
	TasksetID     uuid.UUID  `bun:"taskset_id,type:uuid"`
	TeamID        uuid.UUID  `bun:"team_id,type:uuid"`
	Version       int        `bun:"version"`
	ContentHash   string     `bun:"content_hash"`
	CreatedBy     *uuid.UUID `bun:"created_by,type:uuid"`
	CreatedAt     time.Time  `bun:"created_at"`
	RegistryID    *uuid.UUID `bun:"registry_id,type:uuid"`
	ScenarioID    *uuid.UUID `bun:"scenario_id,type:uuid"`
	TaskContent
}

// TaskContent is what a version holds: the portable fields of upload and export.
type TaskContent struct {
	Name          string           `bun:"name" json:"name"`
	Description   string           `bun:"description" json:"description,omitempty"`
	Env           string           `bun:"env" json:"env,omitempty"`
	Scenario      string           `bun:"scenario" json:"scenario,omitempty"`
	Args          map[string]any   `bun:"args" json:"args"`
	Prompt        string           `bun:"prompt" json:"prompt,omitempty"`
	SystemPrompt  string           `bun:"system_prompt" json:"system_prompt,omitempty"`
	AgentConfig   AgentConfig      `bun:"agent_config" json:"agent_config"`
	RuntimeConfig RuntimeConfig    `bun:"runtime_config" json:"runtime_config"`
	Validation    []ValidationCall `bun:"validation" json:"validation"`
}

// hash fingerprints a version's content together with what it resolved to, so that an upload of
// unchanged content makes no new version.
func (tc TaskContent) hash(registryID, scenarioID *uuid.UUID) string {
	b, _ := json.Marshal(struct {
		TaskContent
		R, S *uuid.UUID
	}{tc, registryID, scenarioID})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TaskUpload is one task of an upload.
type TaskUpload struct {
	TaskContent
	// TaskID, ExternalID and the name identify an existing task, in that order of precedence.
	TaskID     string
	ExternalID string
	ScenarioID *uuid.UUID
}

// Upload creates or updates tasks in a taskset.
type Upload struct {
	TasksetID   *uuid.UUID
	TasksetName string
	Description string
	// Purpose, when set, is the taskset's purpose from now on (EVAL or TRAINING).
	Purpose string
	// RegistryID is the environment of tasks that name none.
	RegistryID *uuid.UUID
	Tasks      []TaskUpload
}

// UploadResult says what an upload did.
type UploadResult struct {
	TasksetID      uuid.UUID
	TasksetName    string
	TaskCount      int
	TaskVersionIDs []uuid.UUID
	TasksCreated   int
	TasksUpdated   int
	TasksetCreated bool
}

// analyzeAfter is the number of new tasks after which an upload refreshes Postgres statistics.
const analyzeAfter = 1000

// resolvedTask is an upload task after its environment and scenario were looked up.
type resolvedTask struct {
	TaskUpload
	registryID *uuid.UUID
	hash       string
}

// UploadTasks creates the taskset if needed and creates or updates each task, in one transaction:
// a task whose content changed gets a new immutable version; unchanged content keeps its version.
func (s *Store) UploadTasks(ctx context.Context, c *Caller, up Upload) (*UploadResult, error) {
	tasks, err := s.resolveUpload(ctx, c, up)
	if err != nil {
		return nil, err
	}
	res := &UploadResult{TaskCount: len(tasks), TaskVersionIDs: make([]uuid.UUID, len(tasks))}
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		ts, created, err := s.uploadTaskset(ctx, tx, c, up)
		if err != nil {
			return err
		}
		res.TasksetID, res.TasksetName, res.TasksetCreated = ts.ID, ts.Name, created
		existing, err := loadTaskIndex(ctx, tx, ts.ID)
		if err != nil {
			return err
		}
		var w taskWrites
		for i, t := range tasks {
			versionID, outcome, err := existing.upsert(c, ts.ID, i, t, &w)
			if err != nil {
				return err
			}
			res.TaskVersionIDs[i] = versionID
			switch outcome {
			case "created":
				res.TasksCreated++
			case "updated":
				res.TasksUpdated++
			}
		}
		if err := w.flush(ctx, tx); err != nil {
			return err
		}
		_, err = tx.NewUpdate().Model((*Taskset)(nil)).Set("updated_at = ?", now()).Where("id = ?", ts.ID).Exec(ctx)
		return err
	})
	if err == nil && s.Dialect == Postgres && res.TasksCreated >= analyzeAfter {
		// A bulk load leaves the planner with stale statistics until autovacuum runs, and it then
		// sorts whole tasksets instead of walking the name index.
		if _, err := s.DB.ExecContext(ctx, "ANALYZE tasks, task_versions"); err != nil {
			return nil, fmt.Errorf("upload tasks: analyze: %w", err)
		}
	}
	if err != nil {
		var verr ValidationError
		if errors.As(err, &verr) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrForbidden) || errors.Is(err, ErrConflict) {
			return nil, err
		}
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("upload tasks: two tasks of the taskset would share a name or external_id: %w", ErrConflict)
		}
		return nil, fmt.Errorf("upload tasks: %w", err)
	}
	return res, nil
}

// resolveUpload validates every task and looks up environments and scenarios before any write.
func (s *Store) resolveUpload(ctx context.Context, c *Caller, up Upload) ([]resolvedTask, error) {
	r := &uploadResolver{s: s, c: c, envs: map[string]*RegistryRow{}}
	if up.TasksetID == nil && strings.TrimSpace(up.TasksetName) == "" {
		r.bad("taskset_name", "taskset_name or taskset_id is required", nil)
	}
	if up.RegistryID != nil {
		env, err := s.GetRegistry(ctx, c, *up.RegistryID)
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
	c          *Caller
	defaultEnv *RegistryRow
	// envs are the environments named so far, by name.
	envs map[string]*RegistryRow
	verr ValidationError
}

func (r *uploadResolver) bad(loc, msg string, v any) {
	r.verr = append(r.verr, FieldError{Location: loc, Message: msg, Value: v})
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
		for _, v := range ArgsViolations(scenario.ArgsSchema, t.Args) {
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
	if rt.Args == nil {
		rt.Args = map[string]any{}
	}
	if rt.Validation == nil {
		rt.Validation = []ValidationCall{}
	}
	rt.hash = rt.TaskContent.hash(rt.registryID, rt.ScenarioID)
	return rt, nil
}

// env is the environment a task names (looked up once an upload), else the upload's.
func (r *uploadResolver) env(ctx context.Context, loc, name string) (*RegistryRow, error) {
	if name == "" {
		return r.defaultEnv, nil
	}
	if env, ok := r.envs[name]; ok {
		return env, nil
	}
	env, err := r.s.FindRegistry(ctx, r.c, name)
	switch {
	case err == nil:
		r.envs[name] = env
		return env, nil
	case errors.Is(err, ErrNotFound):
		r.bad(loc+".env", fmt.Sprintf("no environment %q is visible to the caller", name), name)
		return nil, nil
	default:
		return nil, err
	}
}

// scenario is the scenario a task runs, by id or by name in its environment's latest build,
// recorded in rt; nil for a task without one, or whose scenario is not found (that is recorded
// as an invalid field).
func (r *uploadResolver) scenario(ctx context.Context, loc string, rt *resolvedTask, env *RegistryRow) (*Scenario, error) {
	var sc Scenario
	switch {
	case rt.ScenarioID != nil:
		err := r.s.DB.NewSelect().Model(&sc).Where("id = ?", *rt.ScenarioID).Scan(ctx)
		switch {
		case err != nil && !isNoRows(err):
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
		if isNoRows(err) {
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

// uploadTaskset finds the upload's taskset (by id, or by name within the team) or creates it.
func (s *Store) uploadTaskset(ctx context.Context, tx bun.Tx, c *Caller, up Upload) (*Taskset, bool, error) {
	var ts Taskset
	if up.TasksetID != nil {
		row, err := s.GetTaskset(ctx, c, *up.TasksetID)
		if err != nil {
			return nil, false, err
		}
		if !row.CanEdit {
			return nil, false, fmt.Errorf("upload to taskset %s: read-only for the caller's team: %w", row.ID, ErrForbidden)
		}
		if err := setPurpose(ctx, tx, &row.Taskset, up.Purpose); err != nil {
			return nil, false, err
		}
		return &row.Taskset, false, nil
	}
	err := tx.NewSelect().Model(&ts).Where("team_id = ? AND name = ?", c.TeamID, up.TasksetName).Scan(ctx)
	if err == nil {
		if up.Description != "" && up.Description != ts.Description {
			ts.Description = up.Description
			if _, err := tx.NewUpdate().Model(&ts).Column("description").WherePK().Exec(ctx); err != nil {
				return nil, false, err
			}
		}
		if err := setPurpose(ctx, tx, &ts, up.Purpose); err != nil {
			return nil, false, err
		}
		return &ts, false, nil
	}
	if !isNoRows(err) {
		return nil, false, err
	}
	ts = Taskset{
		ID: uuid.New(), TeamID: c.TeamID, Name: up.TasksetName, Description: up.Description,
		Columns: map[string]any{}, HiddenProgressStages: []string{}, Stages: []string{}, CreatedBy: &c.UserID,
		Purpose: PurposeEval, CreatedAt: now(), UpdatedAt: now(),
	}
	if up.Purpose != "" {
		ts.Purpose = up.Purpose
	}
	if _, err := tx.NewInsert().Model(&ts).Exec(ctx); err != nil {
		if isUniqueViolation(err) {
			return nil, false, fmt.Errorf("create taskset %q: %w", up.TasksetName, ErrConflict)
		}
		return nil, false, err
	}
	return &ts, true, nil
}

// setPurpose changes a taskset's purpose when an upload names another.
func setPurpose(ctx context.Context, tx bun.Tx, ts *Taskset, purpose string) error {
	if purpose == "" || purpose == ts.Purpose {
		return nil
	}
	ts.Purpose = purpose
	_, err := tx.NewUpdate().Model(ts).Column("purpose").WherePK().Exec(ctx)
	return err
}

// taskIndex is every task of a taskset with its latest content hash, loaded once per upload so
// that matching costs no query per task.
type taskIndex struct {
	byID, byExternal, byName map[string]*indexedTask
}

type indexedTask struct {
	Task `bun:",extend"`
	Hash string `bun:"hash,scanonly"`
}

func loadTaskIndex(ctx context.Context, tx bun.Tx, tasksetID uuid.UUID) (*taskIndex, error) {
	var rows []indexedTask
	if err := tx.NewSelect().Model(&rows).ColumnExpr("tk.*").ColumnExpr("tv.content_hash AS hash").
		Join("LEFT JOIN task_versions AS tv ON tv.id = tk.latest_version_id").
		Where("tk.taskset_id = ?", tasksetID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	idx := &taskIndex{byID: map[string]*indexedTask{}, byExternal: map[string]*indexedTask{}, byName: map[string]*indexedTask{}}
	for i := range rows {
		idx.add(&rows[i])
	}
	return idx, nil
}

func (x *taskIndex) add(t *indexedTask) {
	x.byID[t.ID.String()] = t
	x.byName[t.Name] = t
	if t.ExternalID != nil {
		x.byExternal[*t.ExternalID] = t
	}
}

// taskWrites collects an upload's writes so that they go out in batches.
type taskWrites struct {
	newTasks []Task
	updated  []Task
	versions []TaskVersion
}

func (w *taskWrites) flush(ctx context.Context, tx bun.Tx) error {
	if err := insertInBatches(ctx, tx, w.newTasks, ""); err != nil {
		return err
	}
	for i := range w.updated {
		if _, err := tx.NewUpdate().Model(&w.updated[i]).Column("name", "external_id", "latest_version_id", "version_count", "updated_at").WherePK().Exec(ctx); err != nil {
			return err
		}
	}
	return insertInBatches(ctx, tx, w.versions, "")
}

// upsert matches a task by task_id, external_id, then name, and queues a new version when its
// content changed. It returns the id of the version that holds the content after the upload.
func (x *taskIndex) upsert(c *Caller, tasksetID uuid.UUID, i int, t resolvedTask, w *taskWrites) (uuid.UUID, string, error) {
	var found *indexedTask
	if t.TaskID != "" {
		if found = x.byID[t.TaskID]; found == nil {
			return uuid.Nil, "", ValidationError{{Location: fmt.Sprintf("tasks[%d].task_id", i), Message: "no task with this id in the taskset", Value: t.TaskID}}
		}
	}
	if found == nil && t.ExternalID != "" {
		found = x.byExternal[t.ExternalID]
	}
	if found == nil {
		found = x.byName[t.Name]
	}
	var externalID *string
	if t.ExternalID != "" {
		externalID = &t.ExternalID
	}
	if found != nil && found.LatestVersionID != nil && found.Hash == t.hash && found.Name == t.Name && ptrEq(found.ExternalID, externalID) {
		return *found.LatestVersionID, "unchanged", nil
	}
	outcome := "updated"
	if found == nil {
		outcome = "created"
		found = &indexedTask{Task: Task{ID: uuid.New(), TeamID: c.TeamID, TasksetID: tasksetID, Status: TaskPending, CreatedAt: now()}}
	}
	v := TaskVersion{
		ID: uuid.New(), TaskID: found.ID, TasksetID: tasksetID, TeamID: found.TeamID, Version: found.VersionCount + 1,
		ContentHash: t.hash, CreatedBy: &c.UserID, CreatedAt: now(), RegistryID: t.registryID, ScenarioID: t.ScenarioID,
		TaskContent: t.TaskContent,
	}
	delete(x.byName, found.Name)
	found.Name, found.ExternalID, found.LatestVersionID, found.VersionCount, found.UpdatedAt, found.Hash = t.Name, externalID, &v.ID, v.Version, now(), t.hash
	x.add(found)
	if outcome == "created" {
		w.newTasks = append(w.newTasks, found.Task)
	} else {
		w.updated = append(w.updated, found.Task)
	}
	w.versions = append(w.versions, v)
	return v.ID, outcome, nil
}

func ptrEq(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// ExportedTask is a task's latest version in the portable shape that upload accepts.
type ExportedTask struct {
	TaskID     uuid.UUID
	ExternalID string
	VersionID  uuid.UUID
	TaskContent
}

// ExportTaskset returns the latest version of every task of a taskset the caller may see, by name.
func (s *Store) ExportTaskset(ctx context.Context, c *Caller, ts *TasksetRow) ([]ExportedTask, error) {
	var rows []struct {
		TaskVersion `bun:",extend"`
		ExternalID  *string `bun:"external_id,scanonly"`
		RegName     *string `bun:"reg_name,scanonly"`
	}
	err := s.DB.NewSelect().Model(&rows).
		ColumnExpr("tv.*").ColumnExpr("tk.external_id AS external_id").ColumnExpr("r.name AS reg_name").
		Join("JOIN tasks AS tk ON tk.latest_version_id = tv.id").
		Join("LEFT JOIN registries AS r ON r.id = tv.registry_id").
		Where("tk.taskset_id = ?", ts.ID).
		OrderExpr("tk.name ASC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("export taskset: %w", err)
	}
	out := make([]ExportedTask, len(rows))
	for i, r := range rows {
		out[i] = exported(r.TaskVersion, r.ExternalID, r.RegName)
	}
	return out, nil
}

// exported is a version in the portable shape: the task's external id, and its environment
// named by the registry it was resolved to (when it was).
func exported(v TaskVersion, externalID, registryName *string) ExportedTask {
	e := ExportedTask{TaskID: v.TaskID, VersionID: v.ID, TaskContent: v.TaskContent}
	if externalID != nil {
		e.ExternalID = *externalID
	}
	if registryName != nil {
		e.Env = *registryName
	}
	return e
}

// GetTaskVersion reads one task version the caller's team owns or can see through its taskset.
func (s *Store) GetTaskVersion(ctx context.Context, c *Caller, id uuid.UUID) (*TaskVersion, error) {
	v := new(TaskVersion)
	if err := s.DB.NewSelect().Model(v).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err, "get task version")
	}
	if _, err := s.GetTaskset(ctx, c, v.TasksetID); err != nil {
		return nil, fmt.Errorf("get task version: %w", ErrNotFound)
	}
	return v, nil
}

// VisibleTaskVersions says which of ids are task versions the caller may see (those of tasksets it
// may read), as GetTaskVersion would one by one, in a query per 5,000 ids and one per distinct
// taskset: a launch of 100,000 explicit versions costs tens of queries, not 200,000.
func (s *Store) VisibleTaskVersions(ctx context.Context, c *Caller, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	visible := make(map[uuid.UUID]bool, len(ids))
	seen := map[uuid.UUID]bool{}
	for start := 0; start < len(ids); start += idChunk {
		chunk := ids[start:min(start+idChunk, len(ids))]
		var rows []struct {
			ID        uuid.UUID `bun:"id"`
			TasksetID uuid.UUID `bun:"taskset_id"`
		}
		if err := s.DB.NewSelect().Table("task_versions").Column("id", "taskset_id").Where("id IN (?)", bun.In(chunk)).Scan(ctx, &rows); err != nil {
			return nil, fmt.Errorf("visible task versions: %w", err)
		}
		for _, r := range rows {
			ok, known := seen[r.TasksetID]
			if !known {
				_, err := s.GetTaskset(ctx, c, r.TasksetID)
				if err != nil && !errors.Is(err, ErrNotFound) {
					return nil, err
				}
				ok = err == nil
				seen[r.TasksetID] = ok
			}
			if ok {
				visible[r.ID] = true
			}
		}
	}
	return visible, nil
}

// TaskRow is a task in a taskset listing.
type TaskRow struct {
	Task    `bun:",extend"`
	Version int `bun:"version,scanonly"`
}

// ListTasks pages the tasks of a taskset the caller may see, by name.
func (s *Store) ListTasks(ctx context.Context, c *Caller, tasksetID uuid.UUID, limit, offset int) ([]TaskRow, int, error) {
	if _, err := s.GetTaskset(ctx, c, tasksetID); err != nil {
		return nil, 0, err
	}
	var rows []TaskRow
	total, err := s.DB.NewSelect().Model(&rows).ColumnExpr("tk.*").ColumnExpr("tk.version_count AS version").
		// Names are unique within a taskset, so the name alone is a total order, and the
		// (taskset_id, name) index serves it without sorting the taskset.
		Where("tk.taskset_id = ?", tasksetID).OrderExpr("tk.name ASC").
		Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list tasks: %w", err)
	}
	return rows, int(total), nil
}

// TaskBrief is what a person needs to work on a task: its prompt and its latest content.
type TaskBrief struct {
	Task    Task
	Version TaskVersion
	Prompt  string
}

// GetTaskBrief reads the latest version of a task and the prompt a person works from: the task's
// own prompt, or for a scenario task the scenario's description with its arguments.
func (s *Store) GetTaskBrief(ctx context.Context, c *Caller, taskID uuid.UUID) (*TaskBrief, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	if t.Task.LatestVersionID == nil {
		return nil, fmt.Errorf("task %s has no version: %w", t.Task.ID, ErrNotFound)
	}
	var v TaskVersion
	if err := s.DB.NewSelect().Model(&v).Where("id = ?", *t.Task.LatestVersionID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("task brief: %w", err)
	}
	prompt := v.Prompt
	if prompt == "" && v.Scenario != "" {
		var desc string
		if v.ScenarioID != nil {
			s.DB.NewSelect().Model((*Scenario)(nil)).Column("description").Where("id = ?", *v.ScenarioID).Scan(ctx, &desc) //nolint:errcheck // the brief falls back to the name
		}
		args, _ := json.MarshalIndent(v.Args, "", "  ")
		prompt = fmt.Sprintf("Scenario %q of environment %q.\n\n%s\n\nArguments:\n%s\n", v.Scenario, v.Env, desc, args)
	}
	return &TaskBrief{Task: t.Task, Version: v, Prompt: prompt}, nil
}

// TaskVersions is a task with every version of it, newest first.
type TaskVersions struct {
	Task     Task
	Versions []TaskVersionEntry
}

// TaskVersionEntry is one version: its content in the portable shape, its number, and who made
// it when.
type TaskVersionEntry struct {
	ExportedTask
	Version   int
	CreatedBy *uuid.UUID
	CreatedAt time.Time
}

// ListTaskVersions reads a task the caller may see (through its taskset) with all its versions,
// newest first, each in the portable shape (env named by its environment).
func (s *Store) ListTaskVersions(ctx context.Context, c *Caller, taskID uuid.UUID) (*TaskVersions, error) {
	out := &TaskVersions{}
	if err := s.DB.NewSelect().Model(&out.Task).Where("id = ?", taskID).Scan(ctx); err != nil {
		return nil, notFound(err, "list task versions")
	}
	if _, err := s.GetTaskset(ctx, c, out.Task.TasksetID); err != nil {
		return nil, fmt.Errorf("list task versions: %w", ErrNotFound)
	}
	var rows []struct {
		TaskVersion `bun:",extend"`
		RegName     *string `bun:"reg_name,scanonly"`
	}
	err := s.DB.NewSelect().Model(&rows).ColumnExpr("tv.*").ColumnExpr("r.name AS reg_name").
		Join("LEFT JOIN registries AS r ON r.id = tv.registry_id").
		Where("tv.task_id = ?", taskID).OrderExpr("tv.version DESC").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list task versions: %w", err)
	}
	for _, r := range rows {
		out.Versions = append(out.Versions, TaskVersionEntry{ExportedTask: exported(r.TaskVersion, out.Task.ExternalID, r.RegName),
			Version: r.Version, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt})
	}
	return out, nil
}
