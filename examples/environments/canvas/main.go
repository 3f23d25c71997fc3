// Command canvas serves the canvas example environment (package canvasenv) over stdio, streamable
// HTTP or SSE:
//
//	canvas [--transport stdio|http|sse] [--port 8765]
//
// SIGTERM runs the environment's shutdown hook. The proctor binary carries the same server as
// `proctor example-env canvas`, which `proctor dev` deploys where no Go toolchain is installed.
package main

import (
	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/examples/environments/canvas/canvasenv"
)

func main() { envserver.Main(canvasenv.New) }
