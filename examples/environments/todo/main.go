// Command todo serves the todo example environment (package todoenv) over stdio, streamable
// HTTP or SSE:
//
//	todo [--transport stdio|http|sse] [--port 8765]
//
// SIGTERM runs the environment's shutdown hook. The proctor binary carries the same server as
// `proctor example-env todo`, which `proctor dev` deploys where no Go toolchain is installed.
package main

import (
	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/examples/environments/todo/todoenv"
)

func main() { envserver.Main(todoenv.New) }
