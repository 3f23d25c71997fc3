package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// ShellInImage is where WithShell puts Proctor's shell server (cmd/proctor-shell) in an image.
const ShellInImage = "/.proctor/shell"

// WithShell returns img with one more layer, the static shell server at shellPath as
// ShellInImage, made the image's command (its ENTRYPOINT; CMD cleared) with the image's
// WORKDIR ("/" without one) as where commands run; and that command. The image is then an
// environment that serves MCP, whatever it held before (a Harbor task's image holds none).
func WithShell(img v1.Image, shellPath string) (v1.Image, []string, error) {
	bin, err := os.ReadFile(shellPath)
	if err != nil {
		return nil, nil, fmt.Errorf("the shell server: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	err = errors.Join(
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: ".proctor/", Mode: 0o755, ModTime: epoch}),
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: ShellInImage[1:], Mode: 0o755, Size: int64(len(bin)), ModTime: epoch}))
	if err == nil {
		_, err = tw.Write(bin)
	}
	if err = errors.Join(err, tw.Close()); err != nil {
		return nil, nil, fmt.Errorf("the shell server's layer: %w", err)
	}
	layer, err := layerOf(buf.Bytes())
	if err != nil {
		return nil, nil, err
	}
	out, err := mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, nil, err
	}
	cf, err := out.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cf = cf.DeepCopy()
	workDir := cf.Config.WorkingDir
	if workDir == "" {
		workDir = "/"
	}
	command := []string{ShellInImage, "--workdir", workDir}
	cf.Config.Entrypoint, cf.Config.Cmd = command, nil
	out, err = mutate.ConfigFile(out, cf)
	if err != nil {
		return nil, nil, err
	}
	return out, command, nil
}

// ShellWorkDir is the working directory a WithShell command names (its --workdir), "" for a
// command that is not the shell server's.
func ShellWorkDir(command []string) string {
	if len(command) == 3 && command[0] == ShellInImage && command[1] == "--workdir" {
		return command[2]
	}
	return ""
}
