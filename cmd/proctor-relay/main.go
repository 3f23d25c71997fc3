// Command proctor-relay gives a brought agent that runs in a container its attempt's endpoints,
// and nothing else: a container provider mounts it into the agent's container as its entrypoint
// (built static, it needs nothing of the image). It listens on LISTEN, inside the container's own
// network namespace, relays every connection to SOCKET, the worker's port (a unix socket mounted
// into the container), and runs the agent's command, passing it the signals it gets and exiting
// with its status. The listener exists before the agent's first instruction.
//
//	proctor-relay LISTEN SOCKET -- COMMAND [ARG...]
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

func main() {
	args := os.Args[1:]
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "usage: proctor-relay LISTEN SOCKET -- COMMAND [ARG...]")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "proctor-relay:", err)
		os.Exit(125)
	}
	go relay(ln, args[1])
	os.Exit(run(args[3:]))
}

// run runs argv with this process's stdio and environment, passes it the signals this process
// gets, and returns its exit status (128 + the signal's number when a signal ended it). As the
// container's first process it also reaps the orphans the agent leaves (a shell's, npm's), which
// would otherwise pile up as zombies.
func run(argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "proctor-relay:", err)
		return 127
	}
	go func() {
		for s := range signals {
			cmd.Process.Signal(s) //nolint:errcheck // it may have exited
		}
	}()
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
		case ws.Signaled():
			return 128 + int(ws.Signal())
		default:
			return ws.ExitStatus()
		}
	}
}

// relay relays each connection ln accepts to the unix socket sock, both ways, until ln closes.
func relay(ln net.Listener, sock string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", sock)
			if err != nil {
				fmt.Fprintln(os.Stderr, "proctor-relay:", err)
				return
			}
			defer u.Close()
			done := make(chan struct{})
			go func() {
				io.Copy(u, c) //nolint:errcheck // ends with either side
				if cw, ok := u.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite() //nolint:errcheck // the other side may be gone
				}
				close(done)
			}()
			io.Copy(c, u) //nolint:errcheck // ends with either side
			if cw, ok := c.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite() //nolint:errcheck // the other side may be gone
			}
			<-done
		}()
	}
}
