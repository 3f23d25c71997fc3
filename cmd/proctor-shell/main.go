// Command proctor-shell is Proctor's shell server (package internal/harbor/shell): the MCP
// server a build adds to an image that has none of its own (a Harbor task's), as its command.
// It is linked statically (CGO_ENABLED=0) so that it runs in any image:
//
//	proctor-shell [--workdir DIR] [--transport stdio|http|sse] [--port 8765]
//
// --workdir is where commands run unless they say otherwise: the image's WORKDIR.
package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/internal/harbor/shell"
)

func main() {
	var cfg shell.Config
	var rest []string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--workdir" && i+1 < len(args):
			cfg.WorkDir = args[i+1]
			i++
		case strings.HasPrefix(a, "--workdir="):
			cfg.WorkDir = strings.TrimPrefix(a, "--workdir=")
		default:
			rest = append(rest, a)
		}
	}
	os.Exit(envserver.MainArgs("proctor-shell", rest, func(logger *slog.Logger) (*envserver.Server, error) {
		return shell.New(logger, cfg)
	}))
}
