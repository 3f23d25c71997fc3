package shell

import (
	"strconv"
	"strings"
)

// screen is a terminal's screen as a program drawing on it with the usual control characters
// and escape sequences (VT100/xterm's common subset) leaves it: rows of cells, a cursor, and the
// rows scrolled off the top (up to a bound). What it does not know (colours, modes, most private
// sequences) it skips: the text stays right.
type screen struct {
	rows, cols int
	cells      [][]rune
	row, col   int
	scrolled   []string // rows that scrolled off the top, oldest first
	maxScroll  int

	// the escape sequence being read: state 0 text, 1 after ESC, 2 in CSI, 3 in OSC (to BEL or ST),
	// 4 after ESC in OSC, 5 after ESC ( or ) (a charset: one more byte)
	state  int
	params []byte
}

// maxParams bounds a control sequence's parameters (bytes), and maxParam each number in them.
const (
	maxParams = 64
	maxParam  = 10000
)

func newScreen(rows, cols, maxScroll int) *screen {
	s := &screen{rows: rows, cols: cols, maxScroll: maxScroll}
	s.cells = make([][]rune, rows)
	for i := range s.cells {
		s.cells[i] = blankRow(cols)
	}
	return s
}

func blankRow(cols int) []rune {
	r := make([]rune, cols)
	for i := range r {
		r[i] = ' '
	}
	return r
}

// write draws text (UTF-8) on the screen.
func (s *screen) write(text string) {
	for _, c := range text {
		switch s.state {
		case 1:
			s.escape(c)
			continue
		case 2:
			switch {
			case c >= 0x40 && c <= 0x7e:
				s.csi(c)
				s.state = 0
			case len(s.params) >= maxParams:
				s.state = 0 // no terminal's sequence is this long: dropped
			default:
				s.params = append(s.params, byte(c))
			}
			continue
		case 3:
			switch c {
			case 0x07:
				s.state = 0
			case 0x1b:
				s.state = 4
			}
			continue
		case 4:
			s.state = 0 // ESC \ ends an OSC
			continue
		case 5:
			s.state = 0
			continue
		}
		switch c {
		case 0x1b:
			s.state = 1
		case '\r':
			s.col = 0
		case '\n', 0x0b, 0x0c:
			s.lineFeed()
		case '\b':
			if s.col > 0 {
				s.col--
			}
		case '\t':
			s.col = min(s.cols-1, (s.col/8+1)*8)
		case 0x07, 0x00, 0x0e, 0x0f:
		default:
			if c < 0x20 || c == 0x7f {
				continue
			}
			if s.col >= s.cols {
				s.col = 0
				s.lineFeed()
			}
			s.cells[s.row][s.col] = c
			s.col++
		}
	}
}

func (s *screen) escape(c rune) {
	s.state = 0
	switch c {
	case '[':
		s.state, s.params = 2, s.params[:0]
	case ']':
		s.state = 3
	case '(', ')', '*', '+':
		s.state = 5
	case 'D': // index
		s.lineFeed()
	case 'E': // next line
		s.col = 0
		s.lineFeed()
	case 'M': // reverse index
		if s.row > 0 {
			s.row--
		}
	case 'c': // reset
		*s = *newScreen(s.rows, s.cols, s.maxScroll)
	}
}

// csi acts on a control sequence ESC [ params final.
func (s *screen) csi(final rune) {
	raw := string(s.params)
	private := strings.HasPrefix(raw, "?") || strings.HasPrefix(raw, ">")
	var n []int
	for _, p := range strings.Split(strings.TrimLeft(raw, "?>="), ";") {
		v, _ := strconv.Atoi(p)
		n = append(n, min(max(v, 0), maxParam)) // a screen is far smaller: no overflow below
	}
	arg := func(i, def int) int {
		if i < len(n) && n[i] > 0 {
			return n[i]
		}
		return def
	}
	if private {
		return // modes (cursor keys, the alternate screen, bracketed paste): the text is what counts
	}
	switch final {
	case 'A':
		s.row = max(0, s.row-arg(0, 1))
	case 'B', 'e':
		s.row = min(s.rows-1, s.row+arg(0, 1))
	case 'C', 'a':
		s.col = min(s.cols-1, s.col+arg(0, 1))
	case 'D':
		s.col = max(0, s.col-arg(0, 1))
	case 'E':
		s.row, s.col = min(s.rows-1, s.row+arg(0, 1)), 0
	case 'F':
		s.row, s.col = max(0, s.row-arg(0, 1)), 0
	case 'G', '`':
		s.col = min(s.cols-1, arg(0, 1)-1)
	case 'd':
		s.row = min(s.rows-1, arg(0, 1)-1)
	case 'H', 'f':
		s.row, s.col = min(s.rows-1, arg(0, 1)-1), min(s.cols-1, arg(1, 1)-1)
	case 'J':
		switch arg(0, 0) {
		case 0:
			s.clearRow(s.row, s.col, s.cols)
			for r := s.row + 1; r < s.rows; r++ {
				s.clearRow(r, 0, s.cols)
			}
		case 1:
			for r := 0; r < s.row; r++ {
				s.clearRow(r, 0, s.cols)
			}
			s.clearRow(s.row, 0, s.col+1)
		default:
			for r := range s.rows {
				s.clearRow(r, 0, s.cols)
			}
		}
	case 'K':
		switch arg(0, 0) {
		case 0:
			s.clearRow(s.row, s.col, s.cols)
		case 1:
			s.clearRow(s.row, 0, s.col+1)
		default:
			s.clearRow(s.row, 0, s.cols)
		}
	case 'X':
		s.clearRow(s.row, s.col, min(s.cols, s.col+arg(0, 1)))
	case 'P': // delete characters
		k := min(arg(0, 1), s.cols-s.col)
		line := s.cells[s.row]
		copy(line[s.col:], line[s.col+k:])
		s.clearRow(s.row, s.cols-k, s.cols)
	case '@': // insert blanks
		k := min(arg(0, 1), s.cols-s.col)
		line := s.cells[s.row]
		copy(line[s.col+k:], line[s.col:s.cols-k])
		s.clearRow(s.row, s.col, s.col+k)
	case 'L', 'M': // insert or delete lines at the cursor
		k := min(arg(0, 1), s.rows-s.row)
		for range k {
			if final == 'L' {
				s.cells = append(s.cells[:s.row], append([][]rune{blankRow(s.cols)}, s.cells[s.row:s.rows-1]...)...)
			} else {
				s.cells = append(append(s.cells[:s.row:s.row], s.cells[s.row+1:]...), blankRow(s.cols))
			}
		}
	}
}

func (s *screen) clearRow(r, from, to int) {
	for c := max(0, from); c < min(to, s.cols); c++ {
		s.cells[r][c] = ' '
	}
}

func (s *screen) lineFeed() {
	if s.row < s.rows-1 {
		s.row++
		return
	}
	s.scrolled = append(s.scrolled, strings.TrimRight(string(s.cells[0]), " "))
	if len(s.scrolled) > s.maxScroll {
		s.scrolled = s.scrolled[len(s.scrolled)-s.maxScroll:]
	}
	s.cells = append(s.cells[1:], blankRow(s.cols))
}

// text is the screen's rows, trailing blanks and trailing empty rows cut.
func (s *screen) text() string {
	lines := make([]string, s.rows)
	for i, r := range s.cells {
		lines[i] = strings.TrimRight(string(r), " ")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}
