//go:build unix && !linux

package envserver

import "syscall"

// dupTo makes newfd refer to oldfd's file.
func dupTo(oldfd, newfd int) error { return syscall.Dup2(oldfd, newfd) }
