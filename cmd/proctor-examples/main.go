// Command proctor-examples serves the example environments the proctor binary carries, the same
// servers as `proctor example-env NAME`, from a small program:
//
//	proctor-examples example-env NAME [--transport stdio|http|sse] [--port 8765]
//
// `proctor dev` on a machine without the Go toolchain deploys the examples by packaging a
// serving binary into their images; with this one beside proctor (`task build` and the release
// image put it there) it packages this one, and an attempt's environment starts without the
// platform's package initialization (see README, "The example environments"). Static, so that it
// runs in any image.
package main

import (
	"fmt"
	"os"

	"github.com/proctorhq/proctor/examples/environments"
)

func main() {
	// The subcommand keeps the command line the same as proctor's: a bundled image runs
	// `BINARY example-env NAME` whichever binary it holds.
	if len(os.Args) < 2 || os.Args[1] != "example-env" {
		fmt.Fprintf(os.Stderr, "Usage: %s example-env NAME [--transport stdio|http|sse] [--port 8765]\n", environments.Binary)
		os.Exit(2)
	}
	os.Exit(environments.Main(environments.Binary+" example-env", os.Args[2:], os.Stderr))
}
