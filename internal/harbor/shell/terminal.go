package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The terminal: one persistent interactive shell on a pseudo-terminal of its own, and the screen
// its output draws (as an agent driving tmux sees it, without tmux in the image). terminal_send
// types into it and answers the screen once the output has settled; terminal_read answers the
// screen. The shell starts at the first call, and again after it exited.

// Terminal size, the rows kept of what scrolled off, and the bounds of a send's wait.
const (
	TerminalRows, TerminalCols = 40, 160
	scrollbackRows             = 1000
	maxWaitSec                 = 60
	// settle is how long the output must have been quiet, after it changed, for a send's wait to
	// end early.
	settle = 300 * time.Millisecond
	// typeTimeout bounds typing into a terminal whose program reads nothing.
	typeTimeout = 5 * time.Second
)

// keyNames are the keys terminal_send can press by name, and what each sends.
var keyNames = map[string]string{
	"Enter": "\r", "Tab": "\t", "Escape": "\x1b", "Backspace": "\x7f", "Space": " ",
	"Up": "\x1b[A", "Down": "\x1b[B", "Right": "\x1b[C", "Left": "\x1b[D",
	"Home": "\x1b[H", "End": "\x1b[F", "PageUp": "\x1b[5~", "PageDown": "\x1b[6~", "Delete": "\x1b[3~",
}

// keySequence is what pressing name sends: a named key, or C-a … C-z, C-[, C-\, C-], C-^, C-_.
func keySequence(name string) (string, bool) {
	if s, ok := keyNames[name]; ok {
		return s, true
	}
	if rest, ok := strings.CutPrefix(name, "C-"); ok && len(rest) == 1 {
		c := rest[0]
		switch {
		case c >= 'a' && c <= 'z':
			return string(rune(c - 'a' + 1)), true
		case c >= '@' && c <= '_':
			return string(rune(c - '@')), true
		}
	}
	return "", false
}

type terminal struct {
	mu      sync.Mutex
	ptm     *os.File
	cmd     *exec.Cmd
	screen  *screen
	changed time.Time     // when the output last drew on the screen
	exited  chan struct{} // closed once the shell has exited
	status  string        // how it exited
}

// start starts the shell on a new pseudo-terminal, in dir, as user as (nil: this program's).
func startTerminal(sh, dir string, env []string, as *account) (*terminal, error) {
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("terminal: no pseudo-terminal here: %w", err)
	}
	fd := int(ptm.Fd())
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0)
	}
	var pts *os.File
	if err == nil {
		pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	}
	if err == nil {
		err = unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: TerminalRows, Col: TerminalCols})
	}
	if err == nil && as != nil {
		err = pts.Chown(int(as.uid), int(as.gid)) // the user's terminal, as a login's is
	}
	if err != nil {
		ptm.Close()
		if pts != nil {
			pts.Close()
		}
		return nil, fmt.Errorf("terminal: %w", err)
	}
	defer pts.Close()
	cmd := exec.Command(sh, "-i")
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = dir, pts, pts, pts
	cmd.Env = append(env, "TERM=xterm", fmt.Sprintf("LINES=%d", TerminalRows), fmt.Sprintf("COLUMNS=%d", TerminalCols))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	as.as(cmd)
	if err := startChild(cmd); err != nil {
		ptm.Close()
		return nil, fmt.Errorf("terminal: start %s: %w", sh, err)
	}
	t := &terminal{ptm: ptm, cmd: cmd, screen: newScreen(TerminalRows, TerminalCols, scrollbackRows), exited: make(chan struct{})}
	go t.read()
	go func() {
		err := waitChild(cmd)
		t.mu.Lock()
		t.status = "exited"
		if err != nil {
			t.status = "exited: " + err.Error()
		}
		t.mu.Unlock()
		close(t.exited)
	}()
	return t, nil
}

// read draws the shell's output on the screen until the terminal closes.
func (t *terminal) read() {
	defer func() {
		if p := recover(); p != nil { // the screen, on output it cannot draw: the shell lives on, unseen
			t.mu.Lock()
			t.status = fmt.Sprintf("the screen failed: %v", p)
			t.mu.Unlock()
			io.Copy(io.Discard, t.ptm)
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := t.ptm.Read(buf)
		if n > 0 {
			t.mu.Lock()
			t.screen.write(string(buf[:n]))
			t.changed = time.Now()
			t.mu.Unlock()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EIO) {
				t.mu.Lock()
				t.status = "read: " + err.Error()
				t.mu.Unlock()
			}
			return
		}
	}
}

// TerminalScreen is what the terminal tools answer: the screen as text (trailing blanks cut),
// the cursor, and whether the shell is still running.
type TerminalScreen struct {
	Screen     string `json:"screen" jsonschema:"the terminal's screen, a line per row (trailing blanks and empty rows cut)"`
	Scrollback string `json:"scrollback,omitempty" jsonschema:"with scrollback: the rows that scrolled off the top, oldest first (up to 1000)"`
	CursorRow  int    `json:"cursor_row" jsonschema:"the cursor's row, from 0"`
	CursorCol  int    `json:"cursor_col" jsonschema:"the cursor's column, from 0"`
	Running    bool   `json:"running" jsonschema:"the shell is still running (false: it exited; the next send starts a new one)"`
	Exited     string `json:"exited,omitempty" jsonschema:"how the shell exited"`
}

func (t *terminal) snapshot(scrollback bool) TerminalScreen {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := TerminalScreen{Screen: t.screen.text(), CursorRow: t.screen.row, CursorCol: t.screen.col, Exited: t.status}
	select {
	case <-t.exited:
	default:
		out.Running, out.Exited = true, ""
	}
	if scrollback {
		out.Scrollback = strings.Join(t.screen.scrolled, "\n")
	}
	return out
}

// TerminalSendArgs are terminal_send's arguments.
type TerminalSendArgs struct {
	Keys    string   `json:"keys,omitempty" jsonschema:"text to type, as is (a newline is Enter)"`
	Press   []string `json:"press,omitempty" jsonschema:"keys to press after the text, by name: Enter, Tab, Escape, Backspace, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, or C-a to C-z (C-c interrupts, C-d ends input)"`
	WaitSec float64  `json:"wait_sec,omitempty" jsonschema:"seconds to wait for the output (default 1, at most 60); the wait ends early once the screen has changed and stayed still for 0.3 s"`
}

// TerminalReadArgs are terminal_read's arguments.
type TerminalReadArgs struct {
	Scrollback bool `json:"scrollback,omitempty" jsonschema:"also answer the rows that scrolled off the top"`
}

// terminalOf is the running terminal, started now when there is none (or it exited).
func (s *server) terminalOf() (*terminal, error) {
	s.termMu.Lock()
	defer s.termMu.Unlock()
	if s.term != nil {
		select {
		case <-s.term.exited:
			s.term.ptm.Close()
			s.term = nil
		default:
			return s.term, nil
		}
	}
	sh := s.shell()
	if sh == "" {
		return nil, errNoShell
	}
	s.envMu.Lock()
	as := s.agentUser
	s.envMu.Unlock()
	t, err := startTerminal(sh, s.cfg.WorkDir, s.environ(nil), as)
	if err != nil {
		return nil, err
	}
	s.term = t
	return t, nil
}

func (s *server) terminalSend(ctx context.Context, in TerminalSendArgs) (TerminalScreen, error) {
	wait := in.WaitSec
	switch {
	case wait == 0:
		wait = 1
	case wait < 0 || wait > maxWaitSec || math.IsNaN(wait):
		return TerminalScreen{}, fmt.Errorf("wait_sec %v: between 0 and %d", in.WaitSec, maxWaitSec)
	}
	keys := in.Keys
	for _, name := range in.Press {
		seq, ok := keySequence(name)
		if !ok {
			return TerminalScreen{}, fmt.Errorf("press %q: not a key name (Enter, Tab, Escape, Backspace, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, C-a … C-z)", name)
		}
		keys += seq
	}
	t, err := s.terminalOf()
	if err != nil {
		return TerminalScreen{}, err
	}
	sent := time.Now()
	if keys != "" {
		// A program that reads no input fills the terminal's buffer: typing then gives up.
		t.ptm.SetWriteDeadline(time.Now().Add(typeTimeout))
		_, err := io.WriteString(t.ptm, strings.ReplaceAll(keys, "\n", "\r"))
		t.ptm.SetWriteDeadline(time.Time{})
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return t.snapshot(false), fmt.Errorf("terminal: the program in the terminal reads no input (%d bytes typed within %s were not taken)", len(keys), typeTimeout)
		}
		if err != nil {
			return TerminalScreen{}, fmt.Errorf("terminal: type: %w", err)
		}
	}
	deadline := sent.Add(time.Duration(wait * float64(time.Second)))
	for time.Now().Before(deadline) {
		t.mu.Lock()
		changed := t.changed
		t.mu.Unlock()
		if changed.After(sent) && time.Since(changed) >= settle {
			break
		}
		select {
		case <-ctx.Done():
			return TerminalScreen{}, ctx.Err()
		case <-t.exited:
			return t.snapshot(false), nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	return t.snapshot(false), nil
}

func (s *server) terminalRead(_ context.Context, in TerminalReadArgs) (TerminalScreen, error) {
	t, err := s.terminalOf()
	if err != nil {
		return TerminalScreen{}, err
	}
	return t.snapshot(in.Scrollback), nil
}
