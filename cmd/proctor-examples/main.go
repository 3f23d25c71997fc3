// Command proctor-examples serves the example environments the proctor binary carries, the same
// servers as `proctor example-env NAME`, from a small program:
//
//	proctor-examples example-env NAME [--transport stdio|http|sse] [--port 8765]
//
// `proctor dev` on a machine without the Go toolchain deploys the examples by packaging a
// serving binary into their images; with this one beside proctor (`task build` and the release
// image put it there) it packages this one, and an attempt's environment starts without the
// platform's package initialization (see README, "After `proctor dev` starts"). Static, so that
// it runs in any image.
package main

import (
	"os"
	"strings"

	"github.com/proctorhq/proctor/examples/environments"
)

func main() {
	prog, args := environments.Binary+" example-env", os.Args[1:]
	switch {
	// The subcommand keeps the command line the same as proctor's: a bundled image runs
	// `BINARY example-env NAME` whichever binary it holds.
	case len(args) > 0 && args[0] == "example-env":
		os.Exit(environments.Main(prog, args[1:], os.Stderr))
	case len(args) > 0 && strings.HasPrefix(args[0], "-"):
		// Main answers -h and --help with the usage (status 0), another flag with a usage
		// error.
		os.Exit(environments.Main(prog, args[:1], os.Stderr))
	default:
		os.Exit(environments.Main(prog, nil, os.Stderr))
	}
}
