package image

import (
	"fmt"
	"os"
	"testing"

	"github.com/proctorhq/proctor/internal/testenv"
)

// TestMain runs this package's builds as a build worker runs them: on a module cache of their own,
// empty at the start, fed only by the proxy each test gives (see testenv.FreshModuleCache).
func TestMain(m *testing.M) {
	cleanup, err := testenv.FreshModuleCache()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "remove the tests' module caches:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
