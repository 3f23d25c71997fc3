// Command proctor-relay gives a brought agent that runs in a container or a pod its attempt's
// endpoints, and nothing else. A provider puts it into the agent's container as its entrypoint
// (built static, it needs nothing of the image). It listens on LISTEN, inside the container's
// own network namespace, relays every connection to the worker's port, and runs the agent's
// command, passing it the signals it gets and exiting with its status. The listener exists
// before the agent's first instruction.
//
//	proctor-relay [--lifeline] LISTEN TARGET -- COMMAND [ARG...]
//
// TARGET says how the worker's port is reached:
//   - a unix socket's path (the container provider mounts the port's socket in): each
//     connection to LISTEN is relayed to a fresh connection to it;
//   - accept:HOST:PORT (the kubernetes provider, whose worker runs on another machine): the
//     relay listens on HOST:PORT too, and the worker keeps a few connections open to it through
//     the API server's port forwarding. On each, the relay first writes an HMAC of the token
//     in $PROCTOR_RELAY_TOKEN and a newline, and the worker answers with the token and a
//     newline: the worker sends nothing to a listener that is not the relay (nor through a
//     connection the kubelet could not make), and the relay closes a connection from anything
//     else in the pod (in a pod whose environment shares the network namespace, its processes
//     could otherwise take the agent's connections). Each connection to LISTEN takes one of them, tells the worker so with one
//     byte, and is relayed through it. The token is not passed on to the command.
//
// With --lifeline the relay's stdin is the worker's hold on the command, for a container the
// worker cannot stop by itself (a pod's ephemeral container): the command's stdin is /dev/null,
// and when the relay's stdin ends (the worker closed it, or its attachment broke) the relay
// stops the command, SIGTERM then SIGKILL after relayproto.LifelineGrace, and exits with status
// 251 (relayproto.StoppedStatus), whatever the command's was. The relay is then the subreaper
// of what the command starts: whenever the command ends, what it left running (however it
// detached) is killed before the relay exits, so nothing of the agent's outlives its run in a
// container it shares (a Harbor task's, where the task's tests run next).
//
//	proctor-relay --copy-root DIR
//
// copies the container's root file system (its image's files: /proc, /sys, /dev, /tmp and DIR
// left out) into DIR, an empty directory, and exits 0 once all is there. The kubernetes provider
// runs it in an ephemeral container of a brought agent's image, DIR a volume of the pod that the
// environment's container does not mount, to show that image to the agent inside the
// environment.
package main

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/proctorhq/proctor/internal/procfs"
	"github.com/proctorhq/proctor/internal/relayproto"
)

// handOver is how long a connection to LISTEN waits for one from the worker; greeting is how
// long a connection from the worker has to send its token; ackWithin how long the worker has to
// answer the byte that gives it a connection.
const (
	handOver  = time.Minute
	greeting  = 10 * time.Second
	ackWithin = 3 * time.Second
)

func main() {
	args := os.Args[1:]
	if len(args) == 2 && args[0] == relayproto.CopyRootFlag {
		if err := copyRoot(args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "proctor-relay: copy the root file system:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	lifeline := len(args) > 0 && args[0] == relayproto.LifelineFlag
	if lifeline {
		args = args[1:]
	}
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "usage: proctor-relay [--lifeline] LISTEN (SOCKET | accept:HOST:PORT) -- COMMAND [ARG...]")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "proctor-relay:", err)
		os.Exit(125)
	}
	if addr, ok := strings.CutPrefix(args[1], relayproto.AcceptPrefix); ok {
		token := os.Getenv(relayproto.TokenEnv)
		os.Unsetenv(relayproto.TokenEnv)
		if token == "" {
			fmt.Fprintln(os.Stderr, "proctor-relay: accept: needs $PROCTOR_RELAY_TOKEN")
			os.Exit(2)
		}
		back, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "proctor-relay:", err)
			os.Exit(125)
		}
		go pair(ln, []net.Listener{back}, token)
	} else {
		go relay(ln, args[1])
	}
	os.Exit(run(args[3:], lifeline))
}

// run runs argv with this process's stdio and environment, passes it the signals this process
// gets, and returns its exit status (128 + the signal's number when a signal ended it). As the
// container's first process it also reaps the orphans the agent leaves (a shell's, npm's), which
// would otherwise pile up as zombies. With lifeline, the end of this process's stdin stops it.
func run(argv []string, lifeline bool) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if lifeline {
		cmd.Stdin = nil // /dev/null
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if lifeline {
		// What the command leaves, however detached, is adopted here and not by the
		// container's first process: leftovers (below) finds it all.
		if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
			fmt.Fprintln(os.Stderr, "proctor-relay: not the subreaper of the command:", errno)
		}
		defer leftovers()
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "proctor-relay:", err)
		return 127
	}
	go func() {
		for s := range signals {
			cmd.Process.Signal(s) //nolint:errcheck // it may have exited
		}
	}()
	var cut atomic.Bool
	if lifeline {
		go func() {
			io.Copy(io.Discard, os.Stdin) //nolint:errcheck // it ends either way
			cut.Store(true)
			fmt.Fprintln(os.Stderr, relayproto.LifelineEnded)
			cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
			time.Sleep(relayproto.LifelineGrace)
			cmd.Process.Kill() //nolint:errcheck // it may have exited
		}()
	}
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			fmt.Fprintln(os.Stderr, "proctor-relay: wait:", err)
			return 125
		case pid != cmd.Process.Pid:
			continue // an orphan, reaped
		case cut.Load():
			return relayproto.StoppedStatus
		case ws.Signaled():
			return 128 + int(ws.Signal())
		default:
			return ws.ExitStatus()
		}
	}
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// leftovers kills what the command left running below this process (its orphans, adopted here),
// until none is left.
func leftovers() {
	for range 50 {
		pids := procfs.Descendants(os.Getpid())
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // it may have exited
		}
		for {
			// Reap them; a zombie is no descendant to kill again.
			if pid, _ := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// relay relays each connection ln accepts to the unix socket sock, until ln closes.
func relay(ln net.Listener, sock string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			u, err := net.Dial("unix", sock)
			if err != nil {
				fmt.Fprintln(os.Stderr, "proctor-relay:", err)
				c.Close()
				return
			}
			splice(c, u)
		}()
	}
}

// pair relays each connection ln accepts through one the worker opened to a back listener (that sent
// token), until ln closes. The worker's connections wait, idle, until one is taken: the relay
// then writes one byte to it, for the worker to know it now carries a connection (and to open
// another). One the worker has let go meanwhile is passed over.
func pair(ln net.Listener, backs []net.Listener, token string) {
	idle := make(chan net.Conn, 64)
	for _, back := range backs {
		go func() {
			for {
				w, err := back.Accept()
				if err != nil {
					return
				}
				go func() {
					if greeted(w, token) {
						idle <- w
					} else {
						w.Close()
					}
				}()
			}
		}()
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			timeout := time.NewTimer(handOver)
			defer timeout.Stop()
			for {
				select {
				case w := <-idle:
					if !open(w) {
						w.Close()
						continue
					}
					if _, err := w.Write([]byte{1}); err != nil || !acked(w) {
						w.Close()
						continue
					}
					splice(c, w)
				case <-timeout.C:
					fmt.Fprintf(os.Stderr, "proctor-relay: no connection from the worker within %s: a connection to %s is closed\n", handOver, ln.Addr())
					c.Close()
				}
				return
			}
		}()
	}
}

// greeted greets w with proof that it knows the token (so that the worker sends it only to the
// relay: a listener of another's on the port gets nothing) and says whether w answered with the
// token and a newline, within greeting.
func greeted(w net.Conn, token string) bool {
	w.SetDeadline(time.Now().Add(greeting)) //nolint:errcheck // a TCP connection's
	defer w.SetDeadline(time.Time{})        //nolint:errcheck // a TCP connection's
	if _, err := io.WriteString(w, relayproto.Hello(token)+"\n"); err != nil {
		return false
	}
	line, err := bufio.NewReaderSize(w, 64).ReadSlice('\n')
	return err == nil && subtle.ConstantTimeCompare(line, []byte(token+"\n")) == 1
}

// acked says whether the worker answered the byte that gave it a connection, within ackWithin:
// one of a port forwarding session that broke (its end not seen here yet) never answers, and the
// agent's connection is given to the next instead of being lost with it.
func acked(w net.Conn) bool {
	w.SetReadDeadline(time.Now().Add(ackWithin)) //nolint:errcheck // a TCP connection's
	defer w.SetReadDeadline(time.Time{})         //nolint:errcheck // a TCP connection's
	var b [1]byte
	_, err := io.ReadFull(w, b[:])
	return err == nil && b[0] == 1
}

// open says whether an idle connection from the worker is still open: it sends nothing until
// it is taken, so a read that does not time out at once found its end.
func open(w net.Conn) bool {
	w.SetReadDeadline(time.Now().Add(time.Millisecond)) //nolint:errcheck // a TCP connection's
	_, err := w.Read(make([]byte, 1))
	w.SetReadDeadline(time.Time{}) //nolint:errcheck // a TCP connection's
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// splice copies a to b and b to a until both directions end, then closes both.
func splice(a, b net.Conn) {
	defer a.Close()
	defer b.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(b, a) //nolint:errcheck // ends with either side
		closeWrite(b)
		close(done)
	}()
	io.Copy(a, b) //nolint:errcheck // ends with either side
	closeWrite(a)
	<-done
}

// closeWrite tells c's peer that nothing more comes, where c can say so.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite() //nolint:errcheck // the other side may be gone
	}
}

// copyRoot copies "/" into dst, an empty directory (a pod's volume): directories, regular files
// and symbolic links as they are, readable by every user (the files are shown read-only to a
// command that may run as another user than this one), owners not kept, other files left out,
// and /proc, /sys, /dev, /tmp and dst not entered. On failure it removes what it wrote: an exit
// status of 0 is the only sign that dst is whole.
func copyRoot(dst string) (err error) {
	if !filepath.IsAbs(dst) || filepath.Clean(dst) != dst || dst == "/" {
		return fmt.Errorf("%s: not an absolute clean path below the root", dst)
	}
	if names, err := os.ReadDir(dst); err != nil || len(names) > 0 {
		if err == nil {
			err = fmt.Errorf("%s is not empty", dst)
		}
		return err
	}
	defer func() {
		if err != nil {
			names, _ := os.ReadDir(dst)
			for _, n := range names {
				os.RemoveAll(filepath.Join(dst, n.Name())) //nolint:errcheck // best effort: the copy failed
			}
		}
	}()
	skip := map[string]bool{"/proc": true, "/sys": true, "/dev": true, "/tmp": true, dst: true}
	// What the container's user may not read is left out, and said: the agent could not read
	// it in its own image either.
	unreadable := func(p string, err error) error {
		if !errors.Is(err, fs.ErrPermission) {
			return err
		}
		fmt.Fprintf(os.Stderr, "proctor-relay: left out %s: %v\n", p, err)
		return nil
	}
	var dirs []string
	err = filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if err := unreadable(p, err); err != nil || d == nil || !d.IsDir() {
				return err
			}
			return fs.SkipDir
		}
		if skip[p] {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil // a link where a mount point would be: not the image's to show
		}
		to := filepath.Join(dst, p)
		info, err := d.Info()
		if err != nil {
			return unreadable(p, err)
		}
		switch {
		case p == "/":
			return nil
		case d.IsDir():
			dirs = append(dirs, to)
			return os.Mkdir(to, info.Mode().Perm()|0o755) // its own mode once written into, below
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return unreadable(p, err)
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			return unreadable(p, copyFile(p, to, info.Mode().Perm()|0o444))
		}
		return nil // a device, socket or pipe of the image: nothing an agent runs
	})
	if err != nil {
		return err
	}
	// Directories' own modes, readable and searchable by all, now that their contents are in.
	for _, d := range dirs {
		info, err := os.Lstat(strings.TrimPrefix(d, dst))
		if err != nil {
			return err
		}
		if err := os.Chmod(d, info.Mode().Perm()|0o555); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies the regular file from to a new file to with mode perm.
func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
