package sandbox

import (
	"debug/elf"
	"fmt"
)

// CheckStatic says whether the file at path is an executable that runs in any image: an ELF
// program with no interpreter (linked statically). Providers check the agent relay
// (cmd/proctor-relay) with it before they put it into images they know nothing of.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: not an executable: %w", path, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically: it must run in any image (build it with CGO_ENABLED=0)", path)
		}
	}
	return nil
}
