package sandbox

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// AgentRootInside is where a sandbox made from an environment's root file system shows a brought
// agent's image (a Mount of its unpacked root): on the /tmp tmpfs, so that a read-only root needs
// no mount point for it.
const AgentRootInside = "/tmp/.proctor/agent"

// Mount shows a directory's files at Target inside a sandbox, read-only unless Writable.
type Mount struct {
	// Source is the directory on this host: the process provider binds it (under bubblewrap),
	// and so does the container provider (its engine shares the worker's file system).
	Source string
	// Image, when set, is an image whose root file system Source holds unpacked (a brought
	// agent's): a provider whose sandboxes run on other machines (kubernetes) copies the image's
	// files in from it instead, where Target is under /tmp.
	Image  *Image
	Target string
	// Writable shows Source read-write (a volume that sandboxes share); an Image mount is never.
	Writable bool
}

// CheckHostMount checks a mount of a host directory (the process and container providers'): an
// absolute, clean target below the root, and an existing absolute source directory.
func CheckHostMount(m Mount) error {
	if !path.IsAbs(m.Target) || path.Clean(m.Target) != m.Target || m.Target == "/" {
		return fmt.Errorf("mount target %q: not an absolute, clean path below the root: %w", m.Target, ErrInvalidSpec)
	}
	if fi, err := os.Stat(m.Source); !filepath.IsAbs(m.Source) || err != nil || !fi.IsDir() {
		return fmt.Errorf("mount source %q: not an existing absolute directory: %w", m.Source, ErrInvalidSpec)
	}
	return nil
}

// Mounter is a provider that can show another image's files in its sandboxes (Spec.Mounts):
// the process provider under bubblewrap, the container provider, and the kubernetes provider
// within a pod (Spec.Within).
type Mounter interface {
	CanMount() bool
}

// AgentCommand is argv, the command of an image whose root file system is root on this host, as
// it runs from inside another image's sandbox that shows root at prefix (a brought agent inside
// its environment). Each path of the image is found in root, its symbolic links followed there
// and not in the sandbox's root. A dynamically linked program is run by its own image's loader
// (its ELF PT_INTERP) with that image's library directories, so that it finds its own libraries
// whatever the environment's image holds, or lacks (a static Go image has no libc); the programs
// it runs in turn are the environment's, with the environment's libraries (LD_LIBRARY_PATH is
// never set). A script's "#!" interpreter is found in the image the same way. Later arguments
// that name a regular file of the image (a script, say) are made to name it under prefix.
//
// Known limits: the program's /proc/self/exe is the loader (Node's process.execPath, say), and
// library symlinks that point to absolute paths resolve in the sandbox's root, not the image's.
func AgentCommand(root, prefix string, argv []string) ([]string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("the agent's image records no command")
	}
	prog, err := findInImage(root, argv[0])
	if err != nil {
		return nil, err
	}
	args := rewriteArgs(root, prefix, argv[1:])
	for range 4 { // a script's interpreter may be a script: a few levels, as the kernel allows
		interp, interpArg, script, err := interpreterOf(root, prog)
		if err != nil {
			return nil, err
		}
		switch {
		case script:
			next, err := findInImage(root, interp)
			if err != nil {
				return nil, fmt.Errorf("the interpreter of %s: %w", prog, err)
			}
			// "#!/usr/bin/env node" would look node up in the environment's PATH: it is the
			// agent image's node that the script is written for.
			if path.Base(next) == "env" && interpArg != "" && !strings.HasPrefix(interpArg, "-") && !strings.ContainsAny(interpArg, " \t") {
				if next, err = findInImage(root, interpArg); err != nil {
					return nil, fmt.Errorf("the interpreter of %s: %w", prog, err)
				}
				interpArg = ""
			}
			front := []string{path.Join(prefix, prog)}
			if interpArg != "" {
				front = append([]string{interpArg}, front...)
			}
			prog, args = next, append(front, args...)
		case interp == "":
			return append([]string{path.Join(prefix, prog)}, args...), nil
		default:
			loader, _, err := resolveIn(root, interp)
			if err != nil {
				return nil, fmt.Errorf("%s: its loader %s is not in the image: %w", prog, interp, err)
			}
			libs := libraryDirs(root, path.Dir(loader))
			for i, d := range libs {
				libs[i] = path.Join(prefix, d)
			}
			out := []string{path.Join(prefix, loader)}
			if len(libs) > 0 {
				out = append(out, "--library-path", strings.Join(libs, ":"))
			}
			return append(append(out, path.Join(prefix, prog)), args...), nil
		}
	}
	return nil, fmt.Errorf("%s: too many levels of script interpreters", argv[0])
}

// findInImage resolves an image's command name in its root file system: an absolute path as is,
// a bare name in the usual PATH; symbolic links followed within root. It answers the path within
// the image of an executable regular file.
func findInImage(root, name string) (string, error) {
	candidates := []string{name}
	if !strings.Contains(name, "/") {
		candidates = nil
		for _, d := range filepath.SplitList(defaultPath) {
			candidates = append(candidates, path.Join(d, name))
		}
	} else if !path.IsAbs(name) {
		return "", fmt.Errorf("the agent's command %q: not an absolute path within its image", name)
	}
	for _, c := range candidates {
		if p, fi, err := resolveIn(root, c); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("the agent's command %q: no executable file of that name in its image", name)
}

// resolveIn resolves name, a path within the file system rooted at root, following symbolic
// links as the kernel would in a sandbox whose root is root: an absolute link starts again at
// root, and ".." stops there. It answers the path within root of what name names, which exists,
// and what that is (the file's own information, as its walk found it: not a link).
func resolveIn(root, name string) (string, fs.FileInfo, error) {
	todo := strings.Split(name, "/")
	var done []string       // resolved components, none a link
	var infos []fs.FileInfo // what each of done is
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done, infos = done[:len(done)-1], infos[:len(infos)-1]
			}
			continue
		}
		at := filepath.Join(root, filepath.Join(done...), c)
		fi, err := os.Lstat(at)
		if err != nil {
			return "", nil, err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done, infos = append(done, c), append(infos, fi)
			continue
		}
		if hops++; hops > 40 {
			return "", nil, fmt.Errorf("%s: too many levels of symbolic links", name)
		}
		target, err := os.Readlink(at)
		if err != nil {
			return "", nil, err
		}
		if path.IsAbs(target) {
			done, infos = nil, nil
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		fi, err := os.Lstat(root)
		return "/", fi, err
	}
	return "/" + strings.Join(done, "/"), infos[len(infos)-1], nil
}

// interpreterOf says how the kernel would run prog, a file of the image: through a "#!" line's
// interpreter and its one optional argument (script true), an ELF program's loader, or neither
// (a static program).
func interpreterOf(root, prog string) (interp, arg string, script bool, err error) {
	f, err := os.Open(filepath.Join(root, prog))
	if err != nil {
		return "", "", false, err
	}
	defer f.Close()
	// The kernel reads a "#!" line of up to 256 bytes; so does this.
	head := make([]byte, 256)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", "", false, err
	}
	if line, ok := bytes.CutPrefix(head[:n], []byte("#!")); ok {
		line, _, _ = bytes.Cut(line, []byte("\n"))
		fields := strings.TrimSpace(string(line))
		i := strings.IndexAny(fields, " \t")
		if i < 0 {
			i = len(fields)
		}
		interp, arg = fields[:i], strings.TrimSpace(fields[i:])
		if interp == "" {
			return "", "", false, fmt.Errorf("%s: a script without an interpreter", prog)
		}
		return interp, arg, true, nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", "", false, fmt.Errorf("%s: neither an ELF program nor a script: %w", prog, err)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(io.LimitReader(p.Open(), 4096)) // PATH_MAX
			if err != nil {
				return "", "", false, fmt.Errorf("%s: its loader: %w", prog, err)
			}
			return strings.TrimRight(string(b), "\x00"), "", false, nil
		}
	}
	return "", "", false, nil
}

// libraryDirs are the image's library directories that exist, resolved within root: those of
// its /etc/ld.so.conf (and the files it includes), the loader's own, then the loader's defaults
// with this architecture's multiarch directories.
func libraryDirs(root, loaderDir string) []string {
	conf := ldSoConf{root: root, seen: map[string]bool{}}
	conf.read("/etc/ld.so.conf", 0)
	dirs := append(conf.dirs, loaderDir)
	if triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]; triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	dirs = append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib")
	var out []string
	for _, d := range dirs {
		if r, fi, err := resolveIn(root, d); err == nil && fi.IsDir() && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// ldSoConf reads the library directories an image's ld.so.conf names, following its "include"
// patterns a few levels deep, each file once, and at most maxLdSoConfFiles files and
// maxLdSoConfDirs directories: an image is its author's, and its configuration may be hostile.
type ldSoConf struct {
	root string
	seen map[string]bool
	dirs []string
}

const (
	maxLdSoConfFiles = 64
	maxLdSoConfDirs  = 256
)

func (c *ldSoConf) read(name string, depth int) {
	p, _, err := resolveIn(c.root, name)
	if err != nil || depth > 3 || c.seen[p] || len(c.seen) >= maxLdSoConfFiles {
		return
	}
	c.seen[p] = true
	f, err := os.Open(filepath.Join(c.root, p))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
	for sc.Scan() && len(c.dirs) < maxLdSoConfDirs {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "include"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			pattern := strings.TrimSpace(rest)
			if !path.IsAbs(pattern) {
				pattern = path.Join(path.Dir(name), pattern)
			}
			// The pattern's directory is resolved in the image and listed there, its names
			// matched one by one: nothing of the host's is globbed.
			dir, _, err := resolveIn(c.root, path.Dir(pattern))
			if err != nil {
				continue
			}
			entries, _ := os.ReadDir(filepath.Join(c.root, dir))
			for _, e := range entries {
				if ok, _ := path.Match(path.Base(pattern), e.Name()); ok {
					c.read(path.Join(dir, e.Name()), depth+1)
				}
			}
			continue
		}
		if path.IsAbs(line) {
			c.dirs = append(c.dirs, line)
		}
	}
}

// rewriteArgs makes each absolute argument that names a regular file of the image (after its
// links) name it under prefix; the rest are left as they are.
func rewriteArgs(root, prefix string, args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if !path.IsAbs(a) {
			continue
		}
		if r, fi, err := resolveIn(root, a); err == nil && fi.Mode().IsRegular() {
			out[i] = path.Join(prefix, r)
		}
	}
	return out
}
