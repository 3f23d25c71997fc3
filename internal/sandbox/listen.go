package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"
)

// Listen is a listener asked for inside a sandbox (Spec.Listen).
type Listen struct {
	// Port is the port on the sandbox's loopback, 1–65535. The sandbox's network namespace
	// is its own, so any port is free there.
	Port int
	// Ready is given the listener once it exists, before the sandbox's command starts; the
	// caller serves it and closes it (also when Start fails after Ready was called).
	Ready func(net.Listener)
}

// check refuses a Listen no provider can honour: a port out of range, or no Ready.
func (l *Listen) check() error {
	if l != nil && (l.Port < 1 || l.Port > 65535 || l.Ready == nil) {
		return fmt.Errorf("listen on port %d: the port must be 1–65535 and Ready set: %w", l.Port, ErrInvalidSpec)
	}
	return nil
}

// checkListen refuses a Listen the process provider cannot honour for spec: one the check above
// refuses.
func checkListen(spec Spec) error { return spec.Listen.check() }

// listenInNetns listens on 127.0.0.1:port in the network namespace of process pid, which must
// not be this process's own. A socket belongs to the namespace it was made in for its whole
// life, whichever thread later accepts on it: so the socket is made on an OS thread that joined
// pid's namespace and is never given back to the scheduler (it ends with its goroutine), and is
// then served from anywhere in this process. The namespace is opened once, checked and joined
// through that one descriptor. Joining takes CAP_SYS_ADMIN over the namespace (a worker running
// as root has it); without it, the error wraps ErrNoListen, as it does where setns is not known.
// Any other failure is the sandbox's, and is returned as it is.
func listenInNetns(pid, port int) (net.Listener, error) {
	if sysSetns == 0 {
		return nil, fmt.Errorf("setns is not known on %s: %w", runtime.GOARCH, ErrNoListen)
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("the sandbox's network namespace: %w", err)
	}
	defer ns.Close()
	theirs, err := ns.Stat()
	if err != nil {
		return nil, fmt.Errorf("the sandbox's network namespace: %w", err)
	}
	ours, err := os.Stat("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("this process's network namespace: %w", err)
	}
	if os.SameFile(theirs, ours) {
		return nil, errors.New("the sandbox shares this process's network namespace: no listener is made there")
	}
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread leaves the namespace by ending
		ch <- func() result {
			if _, _, errno := syscall.Syscall(sysSetns, ns.Fd(), syscall.CLONE_NEWNET, 0); errno != 0 {
				err := fmt.Errorf("join the sandbox's network namespace: %w", errno)
				if errno == syscall.EPERM {
					err = fmt.Errorf("%w: %w", err, ErrNoListen)
				}
				return result{err: err}
			}
			// bubblewrap brings the namespace's loopback up in the sandbox's first process,
			// which may not have got there yet: 127.0.0.1 exists only once it has.
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			for deadline := time.Now().Add(5 * time.Second); ; {
				ln, err := net.Listen("tcp", addr)
				if err == nil || !errors.Is(err, syscall.EADDRNOTAVAIL) || time.Now().After(deadline) {
					if err != nil {
						err = fmt.Errorf("listen on %s inside the sandbox: %w", addr, err)
					}
					return result{ln: ln, err: err}
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}()
	res := <-ch
	return res.ln, res.err
}
