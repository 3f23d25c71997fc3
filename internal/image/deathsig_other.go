//go:build !linux

package image

import "os/exec"

func startDyingWithParent(cmd *exec.Cmd) error { return cmd.Start() }
