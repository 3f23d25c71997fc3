package shell

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// account is a user of the image that commands run as ([agent].user, [verifier].user, exec's
// user): its ids and home, from the image's /etc/passwd.
type account struct {
	name     string
	uid, gid uint32
	home     string
}

func (a *account) String() string {
	if a.name == "" {
		return fmt.Sprintf("uid %d", a.uid)
	}
	return fmt.Sprintf("%s (uid %d)", a.name, a.uid)
}

// lookupAccount resolves user, a name of the passwd file or a numeric uid (one passwd does not
// name runs with its uid as its group, its home /).
func lookupAccount(passwd, user string) (*account, error) {
	b, err := os.ReadFile(passwd)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("user %q: %w", user, err)
	}
	uid, numeric := strconv.ParseUint(user, 10, 32)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 {
			continue
		}
		u, err1 := strconv.ParseUint(f[2], 10, 32)
		g, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		if f[0] == user || numeric == nil && u == uid {
			return &account{name: f[0], uid: uint32(u), gid: uint32(g), home: f[5]}, nil
		}
	}
	if numeric == nil {
		return &account{uid: uint32(uid), gid: uint32(uid), home: "/"}, nil
	}
	return nil, fmt.Errorf("user %q: not a user of this image (%s names none of that name), nor a uid", user, passwd)
}

// as makes cmd run as a (nil: as this program), with its HOME, USER and LOGNAME.
func (a *account) as(cmd *exec.Cmd) {
	if a == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: []uint32{}}
	name := a.name
	if name == "" {
		name = strconv.Itoa(int(a.uid))
	}
	cmd.Env = append(cmd.Env, "HOME="+a.home, "USER="+name, "LOGNAME="+name)
}

// asAccount runs f on an OS thread of its own whose file-system ids and groups are a's (nil:
// this program's), so that what f creates is a's and what a may not touch it may not either;
// the thread ends with f (never handed back to other goroutines with a's ids).
func asAccount(a *account, f func() error) error {
	if a == nil {
		return f()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		// Raw system calls, this thread's alone (Go's syscall.Setuid and the like change every
		// thread's).
		if err := unix.Setgroups([]int{int(a.gid)}); err != nil {
			done <- fmt.Errorf("as %s: %w", a, err)
			return
		}
		unix.Setfsgid(int(a.gid))
		unix.Setfsuid(int(a.uid))
		// setfsuid answers no error: it took when asking again answers the id.
		if got, _ := unix.SetfsuidRetUid(-1); got != int(a.uid) {
			done <- fmt.Errorf("as %s: this sandbox cannot switch to that user", a)
			return
		}
		done <- f()
	}()
	return <-done
}

// ownedBy makes the directory d (made if missing) a's, for a user's files that only root could
// make at their place (/solution in /). A d that is a link (to /etc, say) or no directory is
// refused, never followed.
func ownedBy(d string, a *account) error {
	d = filepath.Clean(d)
	if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: not a directory of its own (%v)", d, err)
	}
	if a == nil {
		return nil
	}
	return os.Lchown(d, int(a.uid), int(a.gid))
}
