package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/proctorhq/proctor/models"
)

// containersConf is the containers.conf buildah runs with on build workers: no default ulimits
// (the default nofile limit exceeds what many hosts allow) and runc as the runtime.
const containersConf = "[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = \"runc\"\n"

// Buildah is how build workers run buildah: its own storage under the build dir (the vfs
// driver, which needs no kernel support) and its own containers.conf. Tests seed base images
// into the same storage with it.
func Buildah(buildDir string) (args []string, env []string, err error) {
	root := filepath.Join(buildDir, "containers")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, nil, err
	}
	conf := filepath.Join(root, "containers.conf")
	if err := os.WriteFile(conf, []byte(containersConf), 0o600); err != nil {
		return nil, nil, err
	}
	args = []string{"--root", filepath.Join(root, "storage"), "--runroot", filepath.Join(root, "run"), "--storage-driver", "vfs"}
	return args, append(os.Environ(), "CONTAINERS_CONF="+conf), nil
}

// dockerfileBuild builds the Dockerfile in dir with buildah (its RUN steps isolated with runc and
// no network) and writes the image as an OCI archive at out, named ref.
func (a *Activities) dockerfileBuild(ctx context.Context, b *models.Build, dir, ref, out string, log io.Writer) error {
	bin, err := exec.LookPath("buildah")
	if err != nil {
		return buildFailed("the source has a Dockerfile, and this server's build workers have no buildah to build it: install buildah (and runc) on them, or deploy a Go environment")
	}
	args, env, err := Buildah(a.Build.Dir)
	if err != nil {
		return err
	}
	run := func(what string, extra ...string) error {
		cmd := exec.CommandContext(ctx, bin, append(slices.Clone(args), extra...)...)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, log, log
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	tag := "localhost/" + ref
	// --timestamp 0: the image's created time and its files' times are the epoch, so that the
	// same source builds to the same digest (RUN steps that write what differs aside).
	bud := []string{"bud", "--isolation", "oci", "--network", "none", "--layers=false", "--timestamp", "0", "-f", "Dockerfile", "-t", tag}
	secretArgs, cleanup, err := a.buildSecretFiles(ctx, b, log)
	if err != nil {
		return err
	}
	defer cleanup()
	bud = append(bud, secretArgs...)
	for _, k := range sortedKeys(b.Options.BuildArgs) {
		bud = append(bud, "--build-arg", k+"="+b.Options.BuildArgs[k])
	}
	if b.Options.NoCache {
		bud = append(bud, "--no-cache")
	}
	if err := run("buildah bud", append(bud, ".")...); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return buildFailed("the Dockerfile did not build (see the build log): %v", err)
		}
		return err
	}
	defer run("buildah rmi", "rmi", tag) //nolint:errcheck // the image is in the bucket; local storage is a cache
	return run("buildah push", "push", tag, "oci-archive:"+out+":"+ref)
}

// buildSecretFiles opens b's secrets into files of their own (mode 0600, in a directory outside
// the build context) and returns buildah's --secret arguments for them, and a cleanup that
// removes the files. The log names the secrets, never their values.
func (a *Activities) buildSecretFiles(ctx context.Context, b *models.Build, log io.Writer) ([]string, func(), error) {
	sealed, err := a.registry().BuildSecrets(ctx, b.ID)
	if err != nil || len(sealed) == 0 {
		return nil, func() {}, err
	}
	if a.Secrets == nil {
		return nil, nil, buildFailed("the build has secrets, and this build worker has no secrets key to open them: give it the server's (PROCTOR_SECRETS_KEY_FILE)")
	}
	dir, err := os.MkdirTemp(a.Build.Dir, "secrets-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	var args, names []string
	for _, name := range slices.Sorted(maps.Keys(sealed)) {
		v, err := a.Secrets.Decrypt(sealed[name], models.BuildSecretContext(b.ID, name))
		if err != nil {
			cleanup()
			return nil, nil, buildFailed("build secret %s: %v", name, err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, v, 0o600); err != nil {
			cleanup()
			return nil, nil, err
		}
		args, names = append(args, "--secret", "id="+name+",src="+path), append(names, name)
	}
	fmt.Fprintf(log, "build secrets: %s (RUN --mount=type=secret,id=NAME reads each)\n", strings.Join(names, ", "))
	return args, cleanup, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
