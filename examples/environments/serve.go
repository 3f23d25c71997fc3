package environments

import (
	"fmt"
	"io"
	"strings"

	"github.com/proctorhq/proctor/envserver"
)

// Binary is the name of the small program (cmd/proctor-examples) that serves the bundled examples
// as `proctor-examples example-env NAME`, built beside proctor by `task build` and in the
// release image. A bundled build packages it when it is there: it starts in a fraction of the
// time and CPU of the proctor binary, which runs the package initialization of the whole
// platform before it serves anything.
const Binary = "proctor-examples"

// Main serves the bundled example args[0] over MCP, the rest of args being envserver's flags
// (--transport, --port), and returns the process's exit status: 0 for help, 2 for a usage error,
// 1 for an unknown example (said on stderr), else envserver.MainArgs's (which reports on
// os.Stderr: 2 for bad flags, 1 when the server fails). prog is the command as its usage names
// it.
func Main(prog string, args []string, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "Usage: %s NAME [--transport stdio|http|sse] [--port 8765]\n\nServe a bundled example environment over MCP. NAME is one of: %s.\n",
			prog, strings.Join(Names(), ", "))
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			return 0
		}
		return 2
	}
	ex, ok := Lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "%s: no bundled example %q; the examples are: %s\n", prog, args[0], strings.Join(Names(), ", "))
		return 1
	}
	return envserver.MainArgs(prog+" "+ex.Name, args[1:], ex.New)
}
