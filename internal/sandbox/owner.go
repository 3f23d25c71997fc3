package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ownerPrefix names the directory each provider keeps its sandboxes' work dirs in, under the
// root: several providers (workers) may share a root, and each sweeps only what dead ones left.
const ownerPrefix = "owner-"

// ownerDir is a provider's own directory under the root, held with an flock on its .lock file
// for as long as the provider lives: a directory whose lock can be taken belongs to a provider
// that is gone (a killed worker).
type ownerDir struct {
	path string
	lock *os.File
}

// claimOwnerDir sweeps the directories of dead providers under root, then makes and locks this
// provider's own.
func claimOwnerDir(root string, log *slog.Logger) (*ownerDir, error) {
	swept, err := sweepDeadOwners(root)
	if err != nil {
		return nil, err
	}
	if swept > 0 {
		log.Info("sandbox: removed the work dirs of stopped workers", "root", root, "owners", swept)
	}
	dir, err := os.MkdirTemp(root, ownerPrefix)
	if err == nil {
		err = os.Chmod(dir, 0o755) // as traversable as the root: work dirs keep their own modes
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox root: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sandbox root: lock %s: %w", dir, err)
	}
	return &ownerDir{path: dir, lock: f}, nil
}

// sweepDeadOwners removes the owner directories under root whose lock nobody holds.
func sweepDeadOwners(root string) (int, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0, fmt.Errorf("sandbox root: %w", err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), ownerPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			// A provider that died between making its directory and locking it; a young one may
			// be a provider starting now.
			if info, ierr := e.Info(); ierr == nil && time.Since(info.ModTime()) > time.Minute && os.RemoveAll(dir) == nil {
				n++
			}
			continue
		}
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // a live provider's
			continue
		}
		// A dead provider's sandboxes' writable roots are still mounted: detached first, or
		// removing the directory would stop at them.
		err = errors.Join(unmountUnder(dir), os.RemoveAll(dir))
		f.Close()
		if err == nil {
			n++
		}
	}
	return n, nil
}

// release removes the provider's directory and drops its lock.
func (o *ownerDir) release() error {
	err := errors.Join(unmountUnder(o.path), os.RemoveAll(o.path))
	o.lock.Close()
	return err
}
