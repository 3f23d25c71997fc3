package sandbox

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// MaxLogLines is how many stderr lines a sandbox keeps. Older lines are
// dropped: the trace's env-logs are streamed through OnLog as they come, so
// the ring only serves late readers and error messages.
const MaxLogLines = 10_000

// maxLogLineBytes caps one log line; a longer line is split so that an
// environment that never writes a newline cannot grow the worker's memory.
const maxLogLineBytes = 64 << 10

// LogRing keeps the last max lines in arrival order.
type LogRing struct {
	mu    sync.Mutex
	max   int
	lines []LogLine
	next  int // where the next line goes once lines is full
}

// NewLogRing keeps the last max lines.
func NewLogRing(max int) *LogRing { return &LogRing{max: max} }

// Add appends l, dropping the oldest line when full.
func (r *LogRing) Add(l LogLine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < r.max {
		r.lines = append(r.lines, l)
		return
	}
	r.lines[r.next] = l
	r.next = (r.next + 1) % r.max
}

// All returns a copy, oldest first.
func (r *LogRing) All() []LogLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]LogLine, 0, len(r.lines))
	out = append(out, r.lines[r.next:]...)
	return append(out, r.lines[:r.next]...)
}

// Tail returns up to n of the newest lines' text, for error messages.
func (r *LogRing) Tail(n int) []string {
	all := r.All()
	if len(all) > n {
		all = all[len(all)-n:]
	}
	out := make([]string, len(all))
	for i, l := range all {
		out[i] = l.Line
	}
	return out
}

// ReadLines reads src until EOF or error, timestamping each line as it is
// read and handing it to ring and, when set, onLog.
func ReadLines(src io.Reader, stream string, ring *LogRing, onLog func(LogLine)) {
	br := bufio.NewReaderSize(src, maxLogLineBytes)
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			line := string(b)
			if line[len(line)-1] == '\n' {
				line = line[:len(line)-1]
			}
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			l := LogLine{Stream: stream, Line: line, Time: time.Now()}
			ring.Add(l)
			if onLog != nil {
				onLog(l)
			}
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}
