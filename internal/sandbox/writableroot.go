package sandbox

import (
	"bufio"
	"os/exec"
	"time"

	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/proctorhq/proctor/internal/forkthread"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A sandbox with a writable root (Spec.WritableRoot: a Harbor task's image, which its tasks
// change anywhere, as root) is given, by a worker that runs as root and runs sandboxes as a
// user of their own (ProcessOptions.RunAs):
//
//   - the image's root owned by that user: a copy of Spec.RootFS made once per image and kept
//     for the provider's life (ownedRoots), every file the user's;
//   - a user namespace in which that user is root (0) and the host's root is nobody (65534, as
//     in every sandbox's namespace): its processes are uid 0 inside, the user outside, without a
//     capability (bubblewrap drops them all), so "root" owns the image's files and nothing else;
//   - an overlay of its own over the copy, mounted by the worker, as its root: its changes land
//     in an upper directory beside its work dir and go with it at Stop; the copy, and the image,
//     stay as they were.
//
// A worker that is not root can do none of this (no mount, no second id to map) and refuses
// such sandboxes; so does one without bubblewrap.

// rootUID is the id the sandbox's user has inside a writable-root sandbox's namespace.
const rootUID = 0

// hostAccount says whether uid is an account of this host (in /etc/passwd), or nobody. A
// writable-root sandbox's namespace is its user's own and maps the host's root: any process of
// that user outside the sandboxes could join it and become the host's root. The sandbox user
// must therefore be no one else's (DefaultRunAs is no account of a usual host).
func hostAccount(uid int) bool {
	if uid == nobodyInside {
		return true
	}
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return true // unknown: the safe answer
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Split(line, ":"); len(f) > 2 && f[2] == fmt.Sprint(uid) {
			return true
		}
	}
	return false
}

// newRootUserns makes a writable-root sandbox's user namespace: uid is root (0) in it and the
// host's root is nobody (65534), as in every sandbox's. The namespace is uid's own: `unshare
// --user`, run as uid, makes it, and this process (root) writes its maps. bubblewrap then runs
// as uid too, and joins it with all capabilities there (its owner's) to build the sandbox,
// then becomes root inside (uid again, outside). Run as the host's root, bubblewrap would keep
// the host's root for the sandbox's processes: it switches ids only to one that differs from
// the id it was started as.
func newRootUserns(uid int) (*os.File, error) {
	bin, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("writable root: no unshare (util-linux) to make its user namespace: %w", err)
	}
	holder := exec.Command(bin, "--user", "--", "cat")
	stdin, err := holder.StdinPipe()
	if err != nil {
		return nil, err
	}
	holder.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}, Pdeathsig: syscall.SIGKILL}
	if err := forkthread.Start(holder); err != nil {
		return nil, fmt.Errorf("writable root: user namespace: %w", err)
	}
	defer holder.Wait()
	defer stdin.Close() // cat ends, and with it the holder: the namespace lives on in ns
	pid := holder.Process.Pid
	own, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		holder.Process.Kill()
		return nil, err
	}
	// The holder unshares at once; its namespace is a new one from then on.
	for i := 0; ; i++ {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", pid))
		if err == nil && ns != own {
			break
		}
		if i == 2000 {
			holder.Process.Kill()
			return nil, fmt.Errorf("writable root: unshare made no user namespace within 2s (%v)", err)
		}
		time.Sleep(time.Millisecond)
	}
	maps := fmt.Sprintf("%d %d 1\n%d 0 1\n", rootUID, uid, nobodyInside)
	for _, f := range []string{"uid_map", "gid_map"} {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/%s", pid, f), []byte(maps), 0); err != nil {
			holder.Process.Kill()
			return nil, fmt.Errorf("writable root: user namespace %s: %w", f, err)
		}
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		holder.Process.Kill()
		return nil, fmt.Errorf("writable root: user namespace: %w", err)
	}
	return ns, nil
}

// ownedRoots makes and keeps the copies of image roots owned by the sandbox user.
type ownedRoots struct {
	dir string // where the copies live (in the provider's owner dir: gone with it)
	uid int    // the sandbox user
	// account: uid is an account of this host (hostAccount), for which no copy is made.
	account bool

	mu     sync.Mutex
	copies map[string]*ownedRoot // by the image root's path
}

type ownedRoot struct {
	mu   sync.Mutex
	path string // set once made
}

// get is rootFS copied, owned by the sandbox user; the first call for an image makes it (a walk
// of the image), the others wait for it.
func (o *ownedRoots) get(rootFS string) (string, error) {
	o.mu.Lock()
	if o.copies == nil {
		o.copies = map[string]*ownedRoot{}
	}
	c := o.copies[rootFS]
	if c == nil {
		c = &ownedRoot{}
		o.copies[rootFS] = c
	}
	o.mu.Unlock()
	// One start makes it while the others wait; a failure (a full disk) is not kept: the next
	// start tries again.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path != "" {
		return c.path, nil
	}
	sum := sha256.Sum256([]byte(rootFS))
	path := filepath.Join(o.dir, hex.EncodeToString(sum[:8]))
	tmp := path + ".making"
	removeAll(tmp)
	err := os.MkdirAll(o.dir, 0o755)
	if err == nil {
		err = copyOwned(rootFS, tmp, o.uid)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		removeAll(tmp)
		return "", fmt.Errorf("the image's root, owned by the sandbox user: %w", err)
	}
	c.path = path
	return path, nil
}

// copyOwned copies the tree src to dst (which must not exist), every entry owned by uid (and
// group uid), modes kept but for the set-id bits: directories, regular files and links; device
// nodes, sockets and pipes are left out (a sandbox has its own /dev).
func copyOwned(src, dst string, uid int) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode().Perm() | fi.Mode()&fs.ModeSticky
		switch {
		case d.IsDir():
			if err := os.Mkdir(to, 0o700); err != nil {
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
			return os.Lchown(to, uid, uid)
		case d.Type().IsRegular():
			if err := copyFile(p, to); err != nil {
				return err
			}
		default:
			return nil
		}
		if err := os.Lchown(to, uid, uid); err != nil {
			return err
		}
		return os.Chmod(to, mode)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in) // copy_file_range where the file system has it
	return errors.Join(err, out.Close())
}

// writableRoot is a sandbox's own overlay: its upper and work directories and the mount point,
// all under dir.
type writableRoot struct {
	dir string
}

func (w writableRoot) merged() string { return filepath.Join(w.dir, "root") }

// mountWritableRoot mounts an overlay of lower (owned by uid) at dir/root, its changes in
// dir/upper, and returns it; on error nothing is left.
func mountWritableRoot(dir, lower string, uid int) (writableRoot, error) {
	w := writableRoot{dir: dir}
	if strings.ContainsAny(lower+dir, ",:\\") {
		return w, fmt.Errorf("writable root: %q or %q holds a character an overlay's options cannot", lower, dir)
	}
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return w, fmt.Errorf("writable root: %w", err) // not ours to remove
	}
	var err error
	for _, d := range []string{upper, work, w.merged()} {
		if err == nil {
			err = os.Mkdir(d, 0o755)
		}
	}
	if err == nil {
		// The root directory shows the upper directory's owner: the sandbox's root.
		err = os.Chown(upper, uid, uid)
	}
	if err == nil {
		err = unix.Mount("overlay", w.merged(), "overlay", unix.MS_NOSUID|unix.MS_NODEV,
			fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work))
	}
	if err != nil {
		removeAll(dir)
		return w, fmt.Errorf("writable root: %w", err)
	}
	return w, nil
}

// remove unmounts the overlay (detached: a process that still holds it keeps its view) and
// removes its directories, the sandbox's changes with them.
func (w writableRoot) remove() error {
	if err := unix.Unmount(w.merged(), unix.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("unmount the writable root: %w", err)
	}
	return removeAll(w.dir)
}

// unmountUnder detaches every mount under dir (deepest first): a dead provider's sandboxes'
// writable roots, before its directory is removed.
func unmountUnder(dir string) error {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // mountinfo names mount points by their real paths
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if strings.HasPrefix(p, dir+string(filepath.Separator)) {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space, and so on).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
