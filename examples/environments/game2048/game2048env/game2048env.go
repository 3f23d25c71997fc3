// Package game2048env is a small example environment built with envserver: a deterministic game
// of 2048 that an agent plays with the visible tools move and board, with the hidden setup
// function new_game, the evaluate function reached_tile, the resource telemetry://live and the
// scenario reach-tile. Proctor's docs, tests and `dev` seeding use it; it may import envserver
// and the standard library only.
//
// The command examples/environments/game2048 serves it, and so does `proctor example-env game2048`:
//
//	game2048 [--transport stdio|http|sse] [--port 8765]
//
// The scenario, and a sequence of visible tool calls that earns reward 1.0 from a fresh server
// (the platform replays such "validation" calls; tile spawns depend only on the seed):
//
//	reach-tile {"target": 16, "seed": 1}
//	  setup    {"name": "new_game", "arguments": <args>}
//	  agent    move {"direction": "down"}; move "left"; move "up"; move "up"; move "left"; move "left"
//	  evaluate {"name": "reached_tile", "arguments": <args>}  → reward 1.0
//
// The reward is log2(largest tile) / log2(target), capped at 1: a 4 tile is worth 0.5 of a 16.
package game2048env

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/proctorhq/proctor/envserver"
)

// table holds the game in play; setup replaces it.
type table struct {
	mu     sync.Mutex
	game   *Game
	seed   uint64
	target int
}

// View is what the visible tools return.
type View struct {
	Board    [][]int `json:"board" jsonschema:"rows of tiles, 0 for an empty cell"`
	Text     string  `json:"text" jsonschema:"the board drawn as text"`
	Score    int     `json:"score"`
	Moves    int     `json:"moves"`
	MaxTile  int     `json:"max_tile"`
	Target   int     `json:"target"`
	Moved    bool    `json:"moved" jsonschema:"whether the last move changed the board"`
	GameOver bool    `json:"game_over"`
}

func (t *table) view(moved bool) View {
	v := View{Text: t.game.String(), Score: t.game.Score, Moves: t.game.Moves, MaxTile: t.game.MaxTile(),
		Target: t.target, Moved: moved, GameOver: t.game.Over()}
	for _, row := range t.game.Board {
		v.Board = append(v.Board, append([]int(nil), row[:]...))
	}
	return v
}

type moveArgs struct {
	Direction string `json:"direction" jsonschema:"up, down, left or right"`
}

// gameArgs are the arguments of reach-tile, passed on to new_game and reached_tile.
type gameArgs struct {
	Target int `json:"target" jsonschema:"the tile to reach: a power of two from 4 to 2048"`
	Seed   int `json:"seed" jsonschema:"seed of the tile spawns; the same seed and moves give the same game"`
}

func (a gameArgs) check() error {
	if a.Target < 4 || a.Target > 2048 || a.Target&(a.Target-1) != 0 {
		return fmt.Errorf("target %d: want a power of two from 4 to 2048", a.Target)
	}
	if a.Seed < 0 {
		return fmt.Errorf("seed %d: want a non-negative number", a.Seed)
	}
	return nil
}

// New builds the 2048 environment. It reads as the environment's manifest: the state, the
// lifecycle hooks, the visible tools, the setup and evaluate hubs, the scenario and the
// telemetry resource.
func New(logger *slog.Logger) (*envserver.Server, error) {
	tb := &table{game: NewGame(1), seed: 1, target: 2048}
	srv := envserver.New("game2048",
		envserver.WithVersion("1.0.0"),
		envserver.WithInstructions("A game of 2048 on a 4x4 board. Slide the tiles with move (up, down, left, right); "+
			"equal tiles that meet merge. Look at the board with board."),
		envserver.WithLogger(logger))
	srv.OnInitialize(tb.deal)
	srv.OnShutdown(func(ctx context.Context) error {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		logger.Info("game2048 terminating", "score", tb.game.Score, "max_tile", tb.game.MaxTile())
		return nil
	})
	err := errors.Join(
		addTools(srv, tb),
		addHubs(srv, tb),
		addScenarios(srv),
		srv.Resource("telemetry://live", "Live status of the game", tb.telemetry),
	)
	if err != nil {
		return nil, fmt.Errorf("build game2048 environment: %w", err)
	}
	return srv, nil
}

// addTools registers the visible tools: what the agent plays with.
func addTools(srv *envserver.Server, tb *table) error {
	return errors.Join(
		added(envserver.AddTool(srv, "move", "Slide every tile up, down, left or right", tb.move)),
		added(envserver.AddTool(srv, "board", "Show the board", tb.board)),
	)
}

// addHubs registers the hidden functions the platform prepares and scores an attempt with,
// behind the setup and evaluate dispatchers.
func addHubs(srv *envserver.Server, tb *table) error {
	setup := envserver.NewHub(envserver.SetupHub)
	evaluate := envserver.NewHub(envserver.EvaluateHub)
	return errors.Join(
		added(envserver.AddTool(setup, "new_game", "Deal a new board from seed, to be played towards target", tb.newGame)),
		added(envserver.AddTool(evaluate, "reached_tile", "Reward log2(largest tile)/log2(target), capped at 1", tb.reachedTile)),
		srv.Mount(setup),
		srv.Mount(evaluate),
	)
}

// added keeps the error of an [envserver.AddTool], dropping the function it hands back.
func added[F any](_ F, err error) error { return err }

// addScenarios declares the task: the prompt the agent gets and the hub calls around it.
func addScenarios(srv *envserver.Server) error {
	return envserver.AddScenario(srv, envserver.Scenario[gameArgs]{
		Name:        "reach-tile",
		Title:       "Reach a tile",
		Description: "Play 2048 from a seeded board until a tile of the target value appears.",
		Prompt: "Play 2048 until the board holds a {{.Target}} tile. Slide the tiles with the move tool " +
			"(up, down, left or right) and look at the board with the board tool.",
		Setup:    envserver.Call{Tool: envserver.SetupHub, Name: "new_game"},
		Evaluate: envserver.Call{Tool: envserver.EvaluateHub, Name: "reached_tile"},
	})
}

// deal is the initialize hook: a fresh board from the current seed.
func (t *table) deal(ctx context.Context, ic *envserver.InitContext) error {
	t.mu.Lock()
	t.game = NewGame(t.seed)
	t.mu.Unlock()
	return ic.Progress(ctx, 100, 100, "board dealt")
}

func (t *table) move(ctx context.Context, in moveArgs) (View, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	moved, err := t.game.Move(in.Direction)
	if err != nil {
		return View{}, err
	}
	return t.view(moved), nil
}

func (t *table) board(ctx context.Context, _ struct{}) (View, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.view(false), nil
}

// newGame is the setup function of reach-tile.
func (t *table) newGame(ctx context.Context, in gameArgs) (View, error) {
	if err := in.check(); err != nil {
		return View{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seed, t.target = uint64(in.Seed), in.Target
	t.game = NewGame(t.seed)
	return t.view(false), nil
}

// reachedTile is the evaluate function of reach-tile.
func (t *table) reachedTile(ctx context.Context, in gameArgs) (envserver.EvaluationResult, error) {
	if err := in.check(); err != nil {
		return envserver.EvaluationResult{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	best := t.game.MaxTile()
	reward := math.Min(1, math.Log2(float64(max(best, 1)))/math.Log2(float64(in.Target)))
	return envserver.EvaluationResult{
		Reward:  reward,
		Done:    best >= in.Target || t.game.Over(),
		Content: fmt.Sprintf("largest tile %d of %d after %d moves", best, in.Target, t.game.Moves),
		Info:    map[string]any{"max_tile": best, "score": t.game.Score, "moves": t.game.Moves},
	}, nil
}

// telemetry is the resource telemetry://live: what a dashboard polls.
func (t *table) telemetry(ctx context.Context) (any, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return map[string]any{"provider": "game2048", "status": "running", "score": t.game.Score,
		"max_tile": t.game.MaxTile(), "moves": t.game.Moves, "timestamp": time.Now().UTC().Format(time.RFC3339)}, nil
}
