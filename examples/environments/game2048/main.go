// Command game2048 serves the game2048 example environment (package game2048env) over stdio, streamable
// HTTP or SSE:
//
//	game2048 [--transport stdio|http|sse] [--port 8765]
//
// SIGTERM runs the environment's shutdown hook. The proctor binary carries the same server as
// `proctor example-env game2048`, which `proctor dev` deploys where no Go toolchain is installed.
package main

import (
	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/examples/environments/game2048/game2048env"
)

func main() { envserver.Main(game2048env.New) }
