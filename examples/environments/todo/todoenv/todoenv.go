// Package todoenv is a small example environment built with envserver: a todo list that an agent
// edits with visible tools (add_todo, list_todos, complete_todo, delete_todo), with the hidden
// setup functions clear and seed, the evaluate functions todos_exist and todos_completed, the
// resource telemetry://live, and two scenarios. Proctor's docs, tests and `dev` seeding use it;
// it may import envserver and the standard library only.
//
// The command examples/environments/todo serves it, and so does `proctor example-env todo`:
//
//	todo [--transport stdio|http|sse] [--port 8765]
//
// Scenarios, and a sequence of visible tool calls that earns reward 1.0 from a fresh server
// (the platform replays such "validation" calls):
//
//	add-todos {"items": ["buy milk", "walk the dog"]}
//	  setup    {"name": "clear", "arguments": <args>}
//	  agent    add_todo {"title": "buy milk"}; add_todo {"title": "walk the dog"}
//	  evaluate {"name": "todos_exist", "arguments": <args>}  → reward 1.0
//
//	complete-todos {"items": ["buy milk", "walk the dog"]}
//	  setup    {"name": "seed", "arguments": <args>}         (ids 1 and 2, open)
//	  agent    complete_todo {"id": 1}; complete_todo {"id": 2}
//	  evaluate {"name": "todos_completed", "arguments": <args>}  → reward 1.0
//
// The reward is the share of the scenario's items that are present (todos_exist) or present
// and done (todos_completed); titles match ignoring case and surrounding space.
package todoenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/proctorhq/proctor/envserver"
)

// Todo is one item of the list.
type Todo struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
	Done  bool   `json:"done"`
}

// store is the environment's state.
type store struct {
	mu     sync.Mutex
	todos  []Todo
	nextID int
	ready  bool
}

func (s *store) reset(titles []string) []Todo {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.todos, s.nextID = nil, 1
	for _, title := range titles {
		s.todos = append(s.todos, Todo{ID: s.nextID, Title: title})
		s.nextID++
	}
	return slices.Clone(s.todos)
}

func (s *store) list() []Todo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.todos)
}

func sameTitle(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}

type addTodoArgs struct {
	Title string `json:"title" jsonschema:"what to do"`
}

type idArgs struct {
	ID int `json:"id" jsonschema:"the todo's id, as list_todos shows it"`
}

type todoResult struct {
	Todo Todo `json:"todo"`
}

type listResult struct {
	Todos []Todo `json:"todos"`
}

// scenarioArgs are the arguments of both scenarios, passed on to their setup and evaluate
// functions.
type scenarioArgs struct {
	Items []string `json:"items" jsonschema:"titles of the todos the scenario is about"`
}

// New builds the todo environment. It reads as the environment's manifest: the state, the
// lifecycle hooks, the visible tools, the setup and evaluate hubs, the scenarios and the
// telemetry resource.
func New(logger *slog.Logger) (*envserver.Server, error) {
	st := &store{nextID: 1}
	srv := envserver.New("todo-env",
		envserver.WithVersion("1.0.0"),
		envserver.WithInstructions("A todo list. Add todos with add_todo, see them with list_todos, "+
			"finish them with complete_todo and remove them with delete_todo."),
		envserver.WithLogger(logger))
	srv.OnInitialize(st.open)
	srv.OnShutdown(func(ctx context.Context) error {
		logger.Info("todo environment terminating", "todos", len(st.list()))
		return nil
	})
	err := errors.Join(
		addTools(srv, st),
		addHubs(srv, st),
		addScenarios(srv),
		srv.Resource("telemetry://live", "Live status of the todo store", st.telemetry),
	)
	if err != nil {
		return nil, fmt.Errorf("build todo environment: %w", err)
	}
	return srv, nil
}

// addTools registers the visible tools: what the agent works with.
func addTools(srv *envserver.Server, st *store) error {
	return errors.Join(
		added(envserver.AddTool(srv, "add_todo", "Add a todo to the list", st.addTodo)),
		added(envserver.AddTool(srv, "list_todos", "List all todos", st.listTodos)),
		added(envserver.AddTool(srv, "complete_todo", "Mark a todo as done", st.completeTodo)),
		added(envserver.AddTool(srv, "delete_todo", "Delete a todo", st.deleteTodo)),
	)
}

// addHubs registers the hidden functions the platform prepares and scores an attempt with,
// behind the setup and evaluate dispatchers.
func addHubs(srv *envserver.Server, st *store) error {
	setup := envserver.NewHub(envserver.SetupHub)
	evaluate := envserver.NewHub(envserver.EvaluateHub)
	return errors.Join(
		added(envserver.AddTool(setup, "clear", "Empty the list", st.clear)),
		added(envserver.AddTool(setup, "seed", "Replace the list with open todos titled items, ids from 1", st.seed)),
		added(envserver.AddTool(evaluate, "todos_exist", "Reward the share of items present in the list", st.todosExist)),
		added(envserver.AddTool(evaluate, "todos_completed", "Reward the share of items present and done", st.todosCompleted)),
		srv.Mount(setup),
		srv.Mount(evaluate),
	)
}

// added keeps the error of an [envserver.AddTool], dropping the function it hands back.
func added[F any](_ F, err error) error { return err }

// addScenarios declares the tasks: the prompt the agent gets and the hub calls around it.
func addScenarios(srv *envserver.Server) error {
	return errors.Join(
		envserver.AddScenario(srv, envserver.Scenario[scenarioArgs]{
			Name:        "add-todos",
			Title:       "Add todos",
			Description: "Starting from an empty list, add the given todos.",
			Prompt:      `Add these todos to my list: {{join .Items "; "}}.`,
			Setup:       envserver.Call{Tool: envserver.SetupHub, Name: "clear"},
			Evaluate:    envserver.Call{Tool: envserver.EvaluateHub, Name: "todos_exist"},
		}),
		envserver.AddScenario(srv, envserver.Scenario[scenarioArgs]{
			Name:        "complete-todos",
			Title:       "Complete todos",
			Description: "The list holds the given todos, all open; mark them done.",
			Prompt:      `Mark these todos as done: {{join .Items "; "}}.`,
			Setup:       envserver.Call{Tool: envserver.SetupHub, Name: "seed"},
			Evaluate:    envserver.Call{Tool: envserver.EvaluateHub, Name: "todos_completed"},
		}),
	)
}

// open is the initialize hook: the store starts empty, and telemetry reports it running.
func (s *store) open(ctx context.Context, ic *envserver.InitContext) error {
	if err := ic.Progress(ctx, 10, 100, "opening the todo store"); err != nil {
		return err
	}
	s.reset(nil)
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
	return ic.Progress(ctx, 100, 100, "todo store ready")
}

func (s *store) addTodo(ctx context.Context, in addTodoArgs) (todoResult, error) {
	if strings.TrimSpace(in.Title) == "" {
		return todoResult{}, errors.New("title must not be empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := Todo{ID: s.nextID, Title: strings.TrimSpace(in.Title)}
	s.nextID++
	s.todos = append(s.todos, t)
	return todoResult{t}, nil
}

func (s *store) listTodos(ctx context.Context, _ struct{}) (listResult, error) {
	return listResult{Todos: s.list()}, nil
}

func (s *store) completeTodo(ctx context.Context, in idArgs) (todoResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.todos {
		if s.todos[i].ID == in.ID {
			s.todos[i].Done = true
			return todoResult{s.todos[i]}, nil
		}
	}
	return todoResult{}, fmt.Errorf("no todo with id %d", in.ID)
}

func (s *store) deleteTodo(ctx context.Context, in idArgs) (todoResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range s.todos {
		if t.ID == in.ID {
			s.todos = slices.Delete(s.todos, i, i+1)
			return todoResult{t}, nil
		}
	}
	return todoResult{}, fmt.Errorf("no todo with id %d", in.ID)
}

// clear is the setup function of add-todos.
func (s *store) clear(ctx context.Context, _ scenarioArgs) (listResult, error) {
	return listResult{Todos: s.reset(nil)}, nil
}

// seed is the setup function of complete-todos.
func (s *store) seed(ctx context.Context, in scenarioArgs) (listResult, error) {
	return listResult{Todos: s.reset(in.Items)}, nil
}

func (s *store) todosExist(ctx context.Context, in scenarioArgs) (envserver.EvaluationResult, error) {
	return score(s.list(), in.Items, func(Todo) bool { return true }, "present"), nil
}

func (s *store) todosCompleted(ctx context.Context, in scenarioArgs) (envserver.EvaluationResult, error) {
	return score(s.list(), in.Items, func(t Todo) bool { return t.Done }, "done"), nil
}

// telemetry is the resource telemetry://live: what a dashboard polls.
func (s *store) telemetry(ctx context.Context) (any, error) {
	todos := s.list()
	done := 0
	for _, t := range todos {
		if t.Done {
			done++
		}
	}
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	status := "starting"
	if ready {
		status = "running"
	}
	return map[string]any{"provider": "todo-env", "status": status, "todos": len(todos), "done": done,
		"timestamp": time.Now().UTC().Format(time.RFC3339)}, nil
}

// score rewards the share of wanted titles that are in todos and satisfy ok.
func score(todos []Todo, wanted []string, ok func(Todo) bool, what string) envserver.EvaluationResult {
	if len(wanted) == 0 {
		return envserver.EvaluationResult{Reward: 1, Done: true, Content: "nothing was asked for"}
	}
	missing := []string{}
	for _, w := range wanted {
		i := slices.IndexFunc(todos, func(t Todo) bool { return sameTitle(t.Title, w) && ok(t) })
		if i < 0 {
			missing = append(missing, w)
		}
	}
	hit := len(wanted) - len(missing)
	return envserver.EvaluationResult{
		Reward:  float64(hit) / float64(len(wanted)),
		Done:    true,
		Content: fmt.Sprintf("%d of %d todos %s", hit, len(wanted), what),
		Info:    map[string]any{"missing": missing},
	}
}
