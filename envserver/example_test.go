package envserver_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"sync"
	"time"

	"github.com/proctorhq/proctor/envserver"
)

// todos is the environment's state: what the agent changes and what evaluate inspects.
type todos struct {
	mu    sync.Mutex
	items []string
}

type addTodoArgs struct {
	Title string `json:"title" jsonschema:"what to do"`
}

type todoList struct {
	Items []string `json:"items"`
}

// scenarioArgs are the arguments of the add-todos scenario, passed to its setup and evaluate
// functions as well.
type scenarioArgs struct {
	Items []string `json:"items" jsonschema:"the todos the agent must add"`
}

// Example is a complete environment: a todo list an agent must fill, with the scenario
// "add-todos", its setup and evaluate functions, a live resource, and both lifecycle hooks.
func Example() {
	state := &todos{}
	srv := envserver.New("todo-env",
		envserver.WithInstructions("A todo list. Use add_todo and list_todos."),
		envserver.WithEnv(state))

	srv.OnInitialize(func(ctx context.Context, ic *envserver.InitContext) error {
		// Anything printed here goes to stderr, never into the stdio MCP stream.
		fmt.Println("preparing a display of", ic.DisplayWidth, "x", ic.DisplayHeight)
		return ic.Progress(ctx, 100, 100, "ready")
	})
	srv.OnShutdown(func(ctx context.Context) error {
		log.Printf("saving %d todos before the container goes away", len(state.items))
		return nil
	})

	// Visible tools: what the agent works with.
	addTodo := func(ctx context.Context, in addTodoArgs) (todoList, error) {
		state.mu.Lock()
		defer state.mu.Unlock()
		state.items = append(state.items, in.Title)
		return todoList{Items: slices.Clone(state.items)}, nil
	}
	envserver.MustAddTool(srv, "add_todo", "Add a todo", addTodo)
	envserver.MustAddTool(srv, "list_todos", "List the todos", func(ctx context.Context, _ struct{}) (todoList, error) {
		state.mu.Lock()
		defer state.mu.Unlock()
		return todoList{Items: slices.Clone(state.items)}, nil
	})

	// Hidden tools: the platform prepares and scores through the setup and evaluate hubs.
	setup := envserver.NewHub(envserver.SetupHub)
	envserver.MustAddTool(setup, "clear", "Start from an empty list", func(ctx context.Context, _ scenarioArgs) (todoList, error) {
		env, _ := envserver.Env[*todos](ctx)
		env.mu.Lock()
		defer env.mu.Unlock()
		env.items = nil
		return todoList{Items: []string{}}, nil
	})
	evaluate := envserver.NewHub(envserver.EvaluateHub)
	envserver.MustAddTool(evaluate, "todos_exist", "Reward the share of wanted todos present", func(ctx context.Context, in scenarioArgs) (envserver.EvaluationResult, error) {
		env, _ := envserver.Env[*todos](ctx)
		env.mu.Lock()
		defer env.mu.Unlock()
		found := 0
		for _, want := range in.Items {
			if slices.Contains(env.items, want) {
				found++
			}
		}
		reward := 1.0
		if len(in.Items) > 0 {
			reward = float64(found) / float64(len(in.Items))
		}
		return envserver.EvaluationResult{Reward: reward, Done: true, Content: fmt.Sprintf("%d of %d todos present", found, len(in.Items))}, nil
	})
	for _, hub := range []*envserver.Hub{setup, evaluate} {
		if err := srv.Mount(hub); err != nil {
			log.Fatal(err)
		}
	}

	// A scenario: the prompt the agent gets and the calls that prepare and score it.
	err := envserver.AddScenario(srv, envserver.Scenario[scenarioArgs]{
		Name:        "add-todos",
		Description: "Add the given todos to an empty list",
		Prompt:      `Add these todos: {{join .Items ", "}}.`,
		Setup:       envserver.Call{Tool: envserver.SetupHub, Name: "clear"},
		Evaluate:    envserver.Call{Tool: envserver.EvaluateHub, Name: "todos_exist"},
	})
	if err != nil {
		log.Fatal(err)
	}

	// A live resource: metadata a dashboard can poll.
	err = srv.Resource("telemetry://live", "Live status", func(ctx context.Context) (any, error) {
		return map[string]any{"status": "running", "todos": len(state.items), "timestamp": time.Now().UTC()}, nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// stdio by default; envserver.HTTP(":8765") or envserver.SSE(":8765") for development.
	// SIGTERM runs the shutdown hook; SIGINT here just cancels (a hot reload).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if os.Getenv("RUN_TODO_ENV") != "" { // keeps `go test` from serving stdin
		if err := srv.Run(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
}
