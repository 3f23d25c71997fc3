package image

import (
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

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
