// Package image makes and reads the OCI images environments run from.
//
// A Go environment (a main package that serves envserver) is built the way ko builds images,
// without any container tooling: a static binary is compiled and layered, with a minimal
// /etc/passwd and /tmp, into a one-layer OCI image (the envserver module supplied to a source
// that requires it without carrying it; see supplyEnvServer). Images travel as OCI archives (a
// tar of an OCI image layout, as `buildah push … oci-archive:` writes them) in object storage,
// and a sandbox host unpacks an image's root filesystem once per digest.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/blob"
)

// RefAnnotation names an image within an OCI layout.
const RefAnnotation = "org.opencontainers.image.ref.name"

// Entrypoint is where a Go environment's binary lives in its image.
const Entrypoint = "/app/env"

// GoSpec says what to compile.
type GoSpec struct {
	// Dir is the module to build in: the directory holding go.mod.
	Dir string
	// Package is the main package, relative to Dir ("." when empty).
	Package string
	// GOPROXY is the module proxy the build may use ("off" builds only from a vendor directory or
	// the worker's module cache); empty keeps the worker's own setting.
	GOPROXY string
	// EnvServer is a directory holding the envserver module (EnvServerModule) that the build
	// supplies to a module requiring it without carrying it; empty supplies nothing. See
	// supplyEnvServer.
	EnvServer string
	// Root is the uploaded source Dir is in (Dir when empty): a replace by a directory outside
	// it names a path of the author's machine, not anything the upload carries.
	Root string
	// Log receives the compiler's output.
	Log io.Writer
}

// ErrBuild wraps a failure of the user's code to build (as opposed to the builder's own).
var ErrBuild = errors.New("build failed")

// BuildGo compiles spec's package into a static binary and layers it into an image whose
// entrypoint runs it.
func BuildGo(ctx context.Context, spec GoSpec) (v1.Image, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("image: building a Go environment needs the Go toolchain on the build worker: %w", err)
	}
	pkg := spec.Package
	if pkg == "" {
		pkg = "."
	}
	if !filepath.IsLocal(pkg) && pkg != "." {
		return nil, fmt.Errorf("%w: package %q is not inside the source", ErrBuild, pkg)
	}
	out, err := os.MkdirTemp("", "proctor-gobuild-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	bin := filepath.Join(out, "env")
	var log bytes.Buffer
	w := io.Writer(&log)
	if spec.Log != nil {
		w = io.MultiWriter(&log, spec.Log)
	}
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", bin}
	env := append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if spec.GOPROXY != "" {
		env = append(env, "GOPROXY="+spec.GOPROXY)
	}
	if _, err := os.Stat(filepath.Join(spec.Dir, "vendor", "modules.txt")); err == nil {
		env = append(env, "GOFLAGS=-mod=vendor")
	} else if spec.EnvServer != "" {
		modFile, err := supplyEnvServer(ctx, goBin, spec, out, w)
		if err != nil {
			return nil, err
		}
		if modFile != "" {
			// -mod=mod: the copy may lack requirements of the supplied envserver (a source
			// tidied against another version of it); the go command adds them to the copy.
			args = append(args, "-mod=mod", "-modfile="+modFile)
		}
	}
	cmd := exec.CommandContext(ctx, goBin, append(args, "./"+filepath.ToSlash(filepath.Clean(pkg)))...)
	cmd.Dir, cmd.Env = spec.Dir, env
	cmd.Stdout, cmd.Stderr = w, w
	dieWithParent(cmd)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: go build: %v\n%s", ErrBuild, err, lastLines(log.String(), 30))
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layer, err := rootLayer(binary)
	if err != nil {
		return nil, err
	}
	return Assemble(layer, binaryConfig())
}

// binaryConfig is the config of an image that runs one binary at Entrypoint (BuildGo's and
// BinaryImage's).
func binaryConfig() v1.Config {
	return v1.Config{Entrypoint: []string{Entrypoint}, WorkingDir: "/app", Env: []string{"PATH=/app:/usr/bin:/bin"}}
}

// Assemble makes a one-layer OCI image with the given config.
func Assemble(layer v1.Layer, cfg v1.Config) (v1.Image, error) {
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", runtime.GOARCH, cfg
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()} // reproducible: the same binary, the same digest
	return mutate.ConfigFile(img, cf)
}

// rootLayer is the file system of a Go environment: its binary, a passwd file, /tmp, and the
// /dev and /proc a sandbox mounts over.
func rootLayer(binary []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	if err := writeRootTar(&buf, bytes.NewReader(binary), int64(len(binary)), nil); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// writeRootTar writes rootLayer's tar, reading the binary (size bytes) from binary, plus the
// host files extras at the same paths (the shared libraries a dynamically linked binary needs).
func writeRootTar(w io.Writer, binary io.Reader, size int64, extras []string) error {
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0).UTC()
	for _, d := range []struct {
		name string
		mode int64
	}{{"app/", 0o755}, {"dev/", 0o755}, {"etc/", 0o755}, {"proc/", 0o755}, {"tmp/", 0o1777}} {
		if err := tw.WriteHeader(&tar.Header{Name: d.name, Typeflag: tar.TypeDir, Mode: d.mode, ModTime: epoch}); err != nil {
			return err
		}
	}
	passwd := []byte("root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")
	if err := tw.WriteHeader(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(passwd)), ModTime: epoch}); err != nil {
		return err
	}
	if _, err := tw.Write(passwd); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(Entrypoint, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: size, ModTime: epoch}); err != nil {
		return err
	}
	if n, err := io.Copy(tw, binary); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("image: the binary changed while it was read (%d of %d bytes)", n, size)
	}
	dirs := map[string]bool{"app": true, "dev": true, "etc": true, "proc": true, "tmp": true}
	for _, p := range extras {
		name := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
		var parents []string
		for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := tw.WriteHeader(&tar.Header{Name: parents[i] + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
				return err
			}
		}
		if err := copyFileInto(tw, p, name, epoch); err != nil {
			return err
		}
	}
	return tw.Close()
}

// copyFileInto writes the host file p (its target, when p is a link) into tw as name.
func copyFileInto(tw *tar.Writer, p, name string, mtime time.Time) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: mtime}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// sharedLibraries lists, as paths on this host, the ELF interpreter and the shared libraries
// (and theirs) that a dynamically linked binary loads: nothing for a static binary, or a file
// that is not ELF.
func sharedLibraries(bin string) ([]string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	var interp string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, err
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if interp == "" {
		return nil, nil
	}
	out := []string{interp}
	queue, err := f.ImportedLibraries()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		p := findLibrary(name)
		if p == "" {
			return nil, fmt.Errorf("image: the binary loads %s, which is not in this host's library directories", name)
		}
		if p != interp {
			out = append(out, p)
		}
		if lf, err := elf.Open(p); err == nil {
			more, _ := lf.ImportedLibraries()
			lf.Close()
			queue = append(queue, more...)
		}
	}
	return out, nil
}

// findLibrary finds a shared library by its soname in the standard library directories.
func findLibrary(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	for _, dir := range []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// BinaryImage layers an existing binary at bin (for instance the proctor binary itself, which
// carries the bundled example environments) into an image like BuildGo's, without compiling
// anything. A dynamically linked binary brings this host's copies of its loader and shared
// libraries, at the paths it loads them from. The compressed layer is written once into cacheDir, named by the
// binary's size and modification time, and reused by later calls; older ones are removed.
func BinaryImage(bin, cacheDir string) (v1.Image, error) {
	f, err := os.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return nil, err
	}
	layerPath := filepath.Join(cacheDir, fmt.Sprintf("binary-%d-%d.tar.gz", fi.Size(), fi.ModTime().UnixNano()))
	if _, err := os.Stat(layerPath); errors.Is(err, os.ErrNotExist) {
		libs, err := sharedLibraries(bin)
		if err != nil {
			return nil, err
		}
		if err := writeBinaryLayer(layerPath, f, fi.Size(), libs); err != nil {
			return nil, err
		}
		if old, _ := filepath.Glob(filepath.Join(cacheDir, "binary-*.tar.gz")); len(old) > 0 {
			for _, o := range old {
				if o != layerPath {
					os.Remove(o)
				}
			}
		}
	} else if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromFile(layerPath, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	return Assemble(layer, binaryConfig())
}

// writeBinaryLayer writes the gzipped root layer holding the binary to path, through a
// temporary file, so that a crash leaves no half-written layer under the final name.
func writeBinaryLayer(path string, binary io.Reader, size int64, libs []string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".layer-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// Speed over size: the layer is written once per binary, and read back at every unpack.
	gz, err := gzip.NewWriterLevel(tmp, gzip.BestSpeed)
	if err != nil {
		tmp.Close()
		return err
	}
	err = writeRootTar(gz, binary, size, libs)
	if cerr := gz.Close(); err == nil {
		err = cerr
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("image: write the binary's layer: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

// WriteArchive writes img, named ref, as an OCI archive to w and returns its digest.
func WriteArchive(img v1.Image, ref string, w io.Writer) (string, error) {
	dir, err := os.MkdirTemp("", "proctor-layout-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{RefAnnotation: ref})); err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	_, err = archive.WriteTar(w, dir, nil)
	return digest.String(), err
}

// ReadArchive opens the image of an OCI archive, unpacking the archive into dir (an existing
// empty directory, which must outlive the image's use); the image named ref, or the only one.
func ReadArchive(path, dir, ref string) (v1.Image, error) {
	if _, err := archive.ExtractFile(path, dir, archive.Limits{MaxBytes: 8 << 30, MaxEntries: 10_000}); err != nil {
		return nil, fmt.Errorf("image: unpack the OCI archive: %w", err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image: not an OCI layout: %w", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if ref == "" && len(m.Manifests) == 1 || d.Annotations[RefAnnotation] == ref {
			return p.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("image: no image %q in the archive", ref)
}

// Unpack writes img's root file system into dst (an existing empty directory), with the /dev,
// /proc and /tmp a sandbox mounts over, and returns its config. Links that point out of the tree
// are refused, like any archive's.
func Unpack(img v1.Image, dst string, lim archive.Limits) (v1.Config, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Config{}, err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	if _, err := archive.ExtractTar(rc, dst, lim); err != nil {
		return v1.Config{}, fmt.Errorf("image: unpack the root file system: %w", err)
	}
	// The mount points a sandbox needs, which images built from a Dockerfile often lack.
	root, err := os.OpenRoot(dst)
	if err != nil {
		return v1.Config{}, err
	}
	defer root.Close()
	for _, d := range []string{"dev", "proc", "tmp"} {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return v1.Config{}, fmt.Errorf("image: mount point /%s: %w", d, err)
		}
	}
	return cf.Config, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ErrNotInWorkspace is returned for a path the image's working directory does not hold.
var ErrNotInWorkspace = errors.New("no such file in the image's working directory")

// workspaceEntries walks the files of img under its working directory (dir, absolute), calling
// fn with each entry's path relative to dir.
func workspaceEntries(img v1.Image, dir string, fn func(rel string, h *tar.Header, r io.Reader) (stop bool, err error)) error {
	prefix := strings.Trim(dir, "/")
	if prefix != "" {
		prefix += "/"
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		if !strings.HasPrefix(name, prefix) || name == prefix {
			continue
		}
		stop, err := fn(strings.TrimSuffix(strings.TrimPrefix(name, prefix), "/"), h, tr)
		if err != nil || stop {
			return err
		}
	}
}

// WorkspaceFile reads the regular file at rel (a path within the working directory dir of img),
// or refuses one over max bytes.
func WorkspaceFile(img v1.Image, dir, rel string, max int64) ([]byte, error) {
	var out []byte
	found := false
	err := workspaceEntries(img, dir, func(name string, h *tar.Header, r io.Reader) (bool, error) {
		if name != rel || h.Typeflag != tar.TypeReg {
			return false, nil
		}
		found = true
		if h.Size > max {
			return true, fmt.Errorf("%w: %s is %d bytes, over %d", archive.ErrUnsafe, rel, h.Size, max)
		}
		b, err := io.ReadAll(io.LimitReader(r, max+1))
		out = b
		return true, err
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: %s", ErrNotInWorkspace, rel)
	}
	return out, err
}

// WriteWorkspace writes img's working directory dir as a gzipped tar to w, paths relative to it.
func WriteWorkspace(img v1.Image, dir string, w io.Writer) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	err := workspaceEntries(img, dir, func(name string, h *tar.Header, r io.Reader) (bool, error) {
		hh := *h
		hh.Name = name
		if h.Typeflag == tar.TypeDir {
			hh.Name += "/"
		}
		if err := tw.WriteHeader(&hh); err != nil {
			return true, err
		}
		if h.Typeflag == tar.TypeReg {
			_, err := io.Copy(tw, r)
			return false, err
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// Fetch reads the image named ref from the OCI archive stored at key, using dir (an existing
// empty directory, which must outlive the image's use) for the archive and its layout.
func Fetch(ctx context.Context, b blob.Bucket, key, ref, dir string) (v1.Image, error) {
	archivePath := filepath.Join(dir, "image.oci.tar")
	if err := blob.Download(ctx, b, key, archivePath); err != nil {
		return nil, fmt.Errorf("image: fetch %s: %w", key, err)
	}
	layoutDir := filepath.Join(dir, "layout")
	if err := os.Mkdir(layoutDir, 0o700); err != nil {
		return nil, err
	}
	return ReadArchive(archivePath, layoutDir, ref)
}

// FromDir makes a one-layer image of the files under dir, with the given config.
func FromDir(dir string, cfg v1.Config) (v1.Image, error) {
	var buf bytes.Buffer
	if _, err := archive.WriteTar(&buf, dir, nil); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	return Assemble(layer, cfg)
}

// WriteDockerArchive writes img as a `docker save` tarball tagged ref, the form a container
// engine's image load takes (Docker and Podman alike).
func WriteDockerArchive(img v1.Image, ref string, w io.Writer) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	return tarball.Write(tag, img, w)
}
