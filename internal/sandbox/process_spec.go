package sandbox

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// checkSpec rejects what cannot run and resolves the command to an absolute
// path, so that a missing binary is a clear error here rather than an exit
// status from inside the sandbox.
func (p *Process) checkSpec(spec Spec) (string, error) {
	switch {
	case spec.ID == "" || spec.ID == "." || spec.ID == ".." || strings.ContainsAny(spec.ID, "/\x00"):
		return "", fmt.Errorf("id %q: %w", spec.ID, ErrInvalidSpec)
	case len(spec.Command) == 0 || spec.Command[0] == "":
		return "", fmt.Errorf("no command: %w", ErrInvalidSpec)
	case spec.Resources.CPU < 0 || spec.Resources.MemoryMB < 0 || spec.Resources.GPU.Count < 0:
		return "", fmt.Errorf("negative resources %+v: %w", spec.Resources, ErrInvalidSpec)
	case spec.User != "" && spec.User != "0" && spec.User != "root":
		return "", fmt.Errorf("user %q: this provider runs a sandbox as its sandbox user only (root in a writable root): %w", spec.User, ErrInvalidSpec)
	case spec.Dir != "" && (!path.IsAbs(spec.Dir) || spec.RootFS == "" || p.isolation != IsolationBubblewrap):
		return "", fmt.Errorf("working directory %q: an absolute path in an image's root, under bubblewrap: %w", spec.Dir, ErrInvalidSpec)
	}
	if spec.WritableRoot {
		switch {
		case spec.RootFS == "":
			return "", fmt.Errorf("a writable root is an image's (RootFS): %w", ErrInvalidSpec)
		case p.isolation != IsolationBubblewrap || p.runAs <= 0:
			return "", fmt.Errorf("the environment needs a writable root file system of its own (a Harbor task's image), which this worker gives only "+
				"under bubblewrap, run as root, with sandboxes run as a user of their own (--sandbox-run-as): run it there, or with the container or kubernetes provider: %w", ErrInvalidSpec)
		case spec.WorkDir != "":
			return "", fmt.Errorf("a writable root is a sandbox's own: not one working in another's work dir: %w", ErrInvalidSpec)
		case p.owned.account:
			return "", fmt.Errorf("the environment needs a writable root, which this worker gives only with a sandbox user that is no account of the host "+
				"(user %d is one, or nobody: its processes could take the host's root through such a sandbox's namespace); run sandboxes as an unused id (--sandbox-run-as, default %d): %w",
				p.runAs, DefaultRunAs, ErrInvalidSpec)
		}
	}
	if err := checkListen(spec); err != nil {
		return "", err
	}
	if d := spec.WorkDir; d != "" {
		if fi, err := os.Stat(d); !filepath.IsAbs(d) || err != nil || !fi.IsDir() {
			return "", fmt.Errorf("work dir %q: not an existing absolute directory: %w", d, ErrInvalidSpec)
		}
	}
	switch {
	case spec.Listen == nil:
	case p.isolation != IsolationBubblewrap:
		return "", fmt.Errorf("isolation %s gives the sandbox no network namespace of its own: %w", p.isolation, ErrNoListen)
	case p.listenBy == "":
		return "", fmt.Errorf("this worker may not enter a sandbox's network namespace (no CAP_SYS_ADMIN) and has no relay to run in front of its command (--agent-relay): %w", ErrNoListen)
	}
	for _, b := range spec.ReadOnlyBinds {
		if !filepath.IsAbs(b) {
			return "", fmt.Errorf("read-only bind %q: not absolute: %w", b, ErrInvalidSpec)
		}
		if _, err := os.Stat(b); err != nil {
			return "", fmt.Errorf("read-only bind: %w: %w", err, ErrInvalidSpec)
		}
	}
	if err := p.checkMounts(spec); err != nil {
		return "", err
	}
	if argv0, ok, err := mountedCommand(spec); ok {
		if err == nil && spec.RootFS != "" {
			err = checkRootFS(spec.RootFS, p.runAs)
		}
		return argv0, err
	}
	if spec.RootFS != "" {
		return p.checkImageCommand(spec)
	}
	argv0, err := lookPath(spec.Command[0], sandboxPath(spec))
	if err != nil {
		return "", fmt.Errorf("command %q: %w: %w", spec.Command[0], err, ErrInvalidSpec)
	}
	if p.runAs > 0 {
		// bubblewrap shows the command's directory at its place: the sandbox's user searches
		// it and runs the command as others do.
		dir, err1 := os.Stat(filepath.Dir(argv0))
		file, err2 := os.Stat(argv0)
		if err := cmp.Or(err1, err2); err != nil || dir.Mode().Perm()&0o001 == 0 || file.Mode().Perm()&0o005 != 0o005 {
			return "", fmt.Errorf("command %q: sandboxes run as user %d, whom %s does not let read and run it (others need r-x on the file, x on its directory): %w",
				spec.Command[0], p.runAs, argv0, ErrInvalidSpec)
		}
	}
	return argv0, nil
}

// checkMounts checks spec's Mounts: only under bubblewrap, an existing directory each, shown at
// an absolute, clean path that is not the root.
func (p *Process) checkMounts(spec Spec) error {
	if len(spec.Mounts) > 0 && p.isolation != IsolationBubblewrap {
		return fmt.Errorf("isolation %s cannot show host directories elsewhere in a sandbox: %w", p.isolation, ErrInvalidSpec)
	}
	for _, m := range spec.Mounts {
		if err := CheckHostMount(m); err != nil {
			return err
		}
	}
	return nil
}

// mountedCommand checks a Command[0] that lies in one of spec's Mounts (ok true): an executable
// regular file there, its links followed within the mount. It answers Command[0] itself, the
// path bubblewrap runs.
func mountedCommand(spec Spec) (string, bool, error) {
	for _, m := range spec.Mounts {
		rel, ok := strings.CutPrefix(spec.Command[0], m.Target+"/")
		if !ok {
			continue
		}
		root, err := os.OpenRoot(m.Source)
		if err != nil {
			return "", true, fmt.Errorf("mount %s: %w: %w", m.Source, err, ErrInvalidSpec)
		}
		defer root.Close()
		if fi, err := root.Stat(rel); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return "", true, fmt.Errorf("command %q: not an executable file in %s: %w", spec.Command[0], m.Source, ErrInvalidSpec)
		}
		return spec.Command[0], true, nil
	}
	return "", false, nil
}

// checkImageCommand checks a RootFS spec: the root file system holds what a
// sandbox mounts over and an executable Command[0]. It returns the path to
// execute: Command[0] itself under bubblewrap, its host path without.
func (p *Process) checkImageCommand(spec Spec) (string, error) {
	if err := checkRootFS(spec.RootFS, p.runAs); err != nil {
		return "", err
	}
	inImage := spec.Command[0]
	if !path.IsAbs(inImage) || !filepath.IsLocal(strings.TrimPrefix(inImage, "/")) {
		return "", fmt.Errorf("command %q: not an absolute path within the image: %w", inImage, ErrInvalidSpec)
	}
	// The entrypoint may be a symlink within the image: resolve it there, not on the host. Under
	// bubblewrap the image is the root, and an absolute link resolves in it; without, the
	// command runs from the host's file system, where os.Root follows no link out of the image.
	name := strings.TrimPrefix(inImage, "/")
	if p.isolation == IsolationBubblewrap {
		resolved, _, err := resolveIn(spec.RootFS, inImage)
		if err != nil {
			return "", fmt.Errorf("command %q: not in the image (%v): %w", inImage, err, ErrInvalidSpec)
		}
		name = strings.TrimPrefix(resolved, "/")
	}
	root, err := os.OpenRoot(spec.RootFS)
	if err != nil {
		return "", fmt.Errorf("root file system: %w: %w", err, ErrInvalidSpec)
	}
	defer root.Close()
	fi, err := root.Stat(name)
	if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("command %q: not an executable file in the image: %w", inImage, ErrInvalidSpec)
	}
	if p.isolation == IsolationBubblewrap {
		return inImage, nil
	}
	return filepath.Join(spec.RootFS, inImage), nil
}

// checkRootFS checks that an image's root file system holds what a sandbox mounts over.
func checkRootFS(rootFS string, runAs int) error {
	if !filepath.IsAbs(rootFS) {
		return fmt.Errorf("root file system %q: not absolute: %w", rootFS, ErrInvalidSpec)
	}
	for _, d := range []string{"dev", "proc", "tmp"} {
		if fi, err := os.Stat(filepath.Join(rootFS, d)); err != nil || !fi.IsDir() {
			return fmt.Errorf("root file system %s has no /%s directory: %w", rootFS, d, ErrInvalidSpec)
		}
	}
	// A sandbox that runs as a user of its own searches its root as others do (an unpacked
	// image's is 0755).
	if fi, err := os.Stat(rootFS); err != nil {
		return fmt.Errorf("root file system: %w: %w", err, ErrInvalidSpec)
	} else if runAs > 0 && fi.Mode().Perm()&0o001 == 0 {
		return fmt.Errorf("root file system %s: others may not search it (mode %v): %w", rootFS, fi.Mode().Perm(), ErrInvalidSpec)
	}
	return nil
}

// lookPath finds name like exec.LookPath, but in the sandbox's PATH rather
// than the worker's.
func lookPath(name, path string) (string, error) {
	isExec := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%s: not an executable file", p)
		}
		return nil
	}
	if strings.Contains(name, "/") {
		abs, err := filepath.Abs(name)
		if err != nil {
			return "", err
		}
		return abs, isExec(abs)
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue // relative PATH entries would depend on the work dir
		}
		if p := filepath.Join(dir, name); isExec(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w in PATH %s", exec.ErrNotFound, path)
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func sandboxPath(spec Spec) string {
	if v, ok := spec.Env["PATH"]; ok {
		return v
	}
	return cmp.Or(os.Getenv("PATH"), defaultPath)
}

// homeDir is HOME and the working directory as the environment sees them.
func homeDir(spec Spec, workDir, isolation string) string {
	if spec.RootFS != "" && isolation == IsolationBubblewrap {
		return WorkDirInImage
	}
	return workDir
}

// sandboxEnv is the environment's whole environment: nothing of the
// worker's leaks in (API keys, database URLs) beyond PATH and LANG.
func sandboxEnv(spec Spec, workDir string, devices []string) []string {
	env := map[string]string{
		"PATH": cmp.Or(os.Getenv("PATH"), defaultPath),
		"HOME": workDir,
	}
	if lang, ok := os.LookupEnv("LANG"); ok {
		env["LANG"] = lang
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	if len(devices) > 0 {
		ids := strings.Join(devices, ",")
		env["CUDA_VISIBLE_DEVICES"] = ids
		env["NVIDIA_VISIBLE_DEVICES"] = ids
	} else {
		// Without GPUs, say so: an unset CUDA_VISIBLE_DEVICES means "all".
		env["CUDA_VISIBLE_DEVICES"] = ""
		env["NVIDIA_VISIBLE_DEVICES"] = "void"
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
