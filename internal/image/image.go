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
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/proctorhq/proctor/internal/archive"
)

// RefAnnotation names an image within an OCI layout.
const RefAnnotation = "org.opencontainers.image.ref.name"

// Entrypoint is where a Go environment's binary lives in its image.
const Entrypoint = "/app/env"

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
	return layerOf(buf.Bytes())
}

// layerOf is a layer of an uncompressed tar held in memory. Its gzip form is made once, for the
// digest, and kept: writing the image compresses the layer again otherwise, and compression is
// most of a build's time after the compile.
func layerOf(tar []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tar)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
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

// FromDir makes a one-layer image of the files under dir, with the given config.
func FromDir(dir string, cfg v1.Config) (v1.Image, error) {
	var buf bytes.Buffer
	if _, err := archive.WriteTar(&buf, dir, nil); err != nil {
		return nil, err
	}
	layer, err := layerOf(buf.Bytes())
	if err != nil {
		return nil, err
	}
	return Assemble(layer, cfg)
}
