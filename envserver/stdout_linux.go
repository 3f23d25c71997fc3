//go:build linux

package envserver

import "syscall"

// dupTo makes newfd refer to oldfd's file. Linux on arm64 and riscv64 has no dup2, only dup3.
func dupTo(oldfd, newfd int) error { return syscall.Dup3(oldfd, newfd, 0) }
