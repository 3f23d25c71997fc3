package shell

import (
	"strings"
	"testing"
)

func TestTheScreenDrawsWhatATerminalWould(t *testing.T) {
	s := newScreen(4, 10, 3)
	s.write("hello\r\nworld")
	if got := s.text(); got != "hello\nworld" || s.row != 1 || s.col != 5 {
		t.Errorf("text %q at %d,%d", got, s.row, s.col)
	}
	// Colours are skipped, the cursor moves, a line is erased from the cursor, a title is no text.
	s.write("\x1b[31mred\x1b[0m\x1b[1;3HX\x1b[2;2H\x1b[K\x1b]0;title\x07")
	if got := s.text(); got != "heXlo\nw" {
		t.Errorf("after escapes: %q", got)
	}
	// Erase the display; the line wraps at the width; rows scroll off the top into the scrollback.
	s.write("\x1b[2J\x1b[H0123456789ab\r\nline2\r\nline3\r\nline4\r\nline5")
	if got := s.text(); got != "line2\nline3\nline4\nline5" {
		t.Errorf("after wrapping and scrolling: %q (scrollback %q)", got, s.scrolled)
	}
	if strings.Join(s.scrolled, "|") != "0123456789|ab" {
		t.Errorf("scrollback %q", s.scrolled)
	}
	// Backspace over a character, as a shell's line editing erases it.
	s = newScreen(2, 10, 0)
	s.write("abc\b\x1b[K")
	if got := s.text(); got != "ab" {
		t.Errorf("after backspace and erase: %q", got)
	}
	// Deleting and inserting characters and lines.
	s = newScreen(3, 6, 0)
	s.write("abcdef\x1b[1;2H\x1b[2P")
	if got := s.text(); got != "adef" {
		t.Errorf("delete two characters: %q", got)
	}
	s.write("\x1b[2@")
	if got := s.text(); got != "a  def" {
		t.Errorf("insert two blanks: %q", got)
	}
	s.write("\x1b[L")
	if got := s.text(); got != "\na  def" {
		t.Errorf("insert a line: %q", got)
	}
	s.write("\x1b[M")
	if got := s.text(); got != "a  def" {
		t.Errorf("delete a line: %q", got)
	}
	// Numbers no screen has, and a sequence that never ends, neither break it nor grow it.
	s = newScreen(3, 6, 0)
	s.write("x\x1b[99999999999999999999C\x1b[99999999999999999999;99999999999999999999Hy\x1b[99999999999999999999P\x1b[99999999999999999999L")
	s.write("\x1b[" + strings.Repeat("1;", 100000) + "z")
	if s.row < 0 || s.row >= 3 || s.col < 0 || s.col > 6 || len(s.params) > maxParams {
		t.Errorf("cursor %d,%d, %d parameter bytes kept", s.row, s.col, len(s.params))
	}
	if _, ok := keySequence("C-c"); !ok {
		t.Error("C-c is not a key")
	}
	if seq, _ := keySequence("C-c"); seq != "\x03" {
		t.Errorf("C-c sends %q", seq)
	}
}
