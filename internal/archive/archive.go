// Package archive unpacks untrusted source archives (tar, tar.gz, zip) into a directory without
// letting them write anywhere else or use more than a byte and entry budget.
//
// Every write goes through an os.Root opened on the destination, so no entry, symlink or hard
// link can reach outside it, whatever the kernel resolves; entry names must be local paths
// (filepath.IsLocal), and links must point inside the tree as well, so that host code that
// later reads the tree never follows one out. Sizes are counted as bytes are written, never taken
// from headers (a zip's declared sizes can lie). On any error the destination is emptied.
package archive

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Limits bound what one archive may unpack to.
type Limits struct {
	// MaxBytes is the most bytes all files together may hold once unpacked.
	MaxBytes int64
	// MaxEntries is the most entries (files, directories, links) the archive may have.
	MaxEntries int
}

// DefaultLimits suit an environment's source tree, vendored dependencies included.
var DefaultLimits = Limits{MaxBytes: 1 << 30, MaxEntries: 200_000}

// ErrUnsafe is wrapped by every refusal of an archive's content (as opposed to an I/O failure):
// an entry that escapes, a link that points out, an unsupported entry, a budget exceeded, a
// malformed archive.
var ErrUnsafe = errors.New("archive refused")

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsafe, fmt.Sprintf(format, args...))
}

// Stats describe what was unpacked.
type Stats struct {
	Files, Dirs, Links int
	Bytes              int64
}

// ExtractFile unpacks the archive at src (its format found from its first bytes) into dst, which
// must be an existing empty directory.
func ExtractFile(src, dst string, lim Limits) (Stats, error) {
	next, closeIt, err := openArchive(src)
	if err != nil {
		return Stats{}, err
	}
	defer closeIt()
	return extract(dst, lim, next, false)
}

// ErrNoEntry is returned by ReadFile for a path the archive has no regular file at.
var ErrNoEntry = errors.New("no such file in the archive")

// ReadFile returns the content of the regular file at name (a path within the archive, with
// slashes) of the archive at src, or a refusal when it holds more than max bytes.
func ReadFile(src, name string, max int64) ([]byte, error) {
	next, closeIt, err := openArchive(src)
	if err != nil {
		return nil, err
	}
	defer closeIt()
	for {
		e, err := next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			return nil, fmt.Errorf("%w: %s", ErrNoEntry, name)
		}
		if n, err := localName(e.name); err != nil || n != name || !e.mode.IsRegular() || e.hardlink {
			continue
		}
		rc, err := e.open()
		if err != nil {
			return nil, refuse("entry %q: %v", name, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, max+1))
		if err != nil {
			return nil, refuse("entry %q: %v", name, err)
		}
		if int64(len(b)) > max {
			return nil, refuse("%s holds more than %d bytes", name, max)
		}
		return b, nil
	}
}

// openArchive opens the archive at src, its format found from its first bytes, as its entries.
func openArchive(src string) (entries, func(), error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (entries, func(), error) {
		f.Close()
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, []byte("PK\x05\x06")):
		zr, err := zip.NewReader(f, info.Size())
		if err != nil {
			return fail(refuse("not a readable zip archive: %v", err))
		}
		return zipEntries(zr), func() { f.Close() }, nil
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(bufio.NewReader(f))
		if err != nil {
			return fail(refuse("not a readable gzip stream: %v", err))
		}
		return tarEntries(tar.NewReader(gz)), func() { gz.Close(); f.Close() }, nil
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return tarEntries(tar.NewReader(f)), func() { f.Close() }, nil
	default:
		return fail(refuse("not a tar, tar.gz or zip archive"))
	}
}

// ExtractTar unpacks an uncompressed tar stream into dst, an existing empty directory.
func ExtractTar(r io.Reader, dst string, lim Limits) (Stats, error) {
	return extract(dst, lim, tarEntries(tar.NewReader(r)), false)
}

// ExtractRootFS is ExtractTar for an image's root file system, whose symbolic links are kept
// whatever they point to: an absolute one (Debian's /lib64/ld-linux-x86-64.so.2, the
// /etc/alternatives links) resolves within the image's root where the image runs, in a sandbox,
// and what reads the tree on this host does so through os.Root (which follows no link out of
// it) or resolves links within the tree itself. Entries are still written only within dst.
func ExtractRootFS(r io.Reader, dst string, lim Limits) (Stats, error) {
	return extract(dst, lim, tarEntries(tar.NewReader(r)), true)
}

// entry is one member of an archive, whatever its format.
type entry struct {
	name     string
	mode     fs.FileMode // type bits and permissions
	linkname string      // a link's target (hard links: a path within the archive)
	hardlink bool
	open     func() (io.ReadCloser, error)
}

// entries yields an archive's members; a nil entry with a nil error ends it.
type entries func() (*entry, error)

func tarEntries(tr *tar.Reader) entries {
	return func() (*entry, error) {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, refuse("malformed tar: %v", err)
		}
		e := &entry{name: h.Name, mode: h.FileInfo().Mode(), linkname: h.Linkname,
			open: func() (io.ReadCloser, error) { return io.NopCloser(tr), nil }}
		switch h.Typeflag {
		case tar.TypeLink:
			e.hardlink = true
		case tar.TypeXGlobalHeader:
			e.mode = fs.ModeIrregular | 0 // pax metadata, not an entry: skipped below
			e.name = ""
		}
		return e, nil
	}
}

func zipEntries(zr *zip.Reader) entries {
	i := 0
	return func() (*entry, error) {
		if i == len(zr.File) {
			return nil, nil
		}
		f := zr.File[i]
		i++
		e := &entry{name: f.Name, mode: f.Mode(), open: f.Open}
		if e.mode&fs.ModeSymlink != 0 {
			rc, err := f.Open()
			if err != nil {
				return nil, refuse("zip entry %q: %v", f.Name, err)
			}
			target, err := io.ReadAll(io.LimitReader(rc, 4097))
			rc.Close()
			if err != nil || len(target) > 4096 {
				return nil, refuse("zip symlink %q: unreadable or overlong target", f.Name)
			}
			e.linkname = string(target)
		}
		return e, nil
	}
}

func extract(dst string, lim Limits, next entries, rootFS bool) (st Stats, err error) {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return st, err
	}
	defer root.Close()
	if names, err := readNames(dst); err != nil || len(names) > 0 {
		if err == nil {
			err = fmt.Errorf("archive: %s is not empty", dst)
		}
		return st, err
	}
	defer func() {
		if err != nil {
			emptyDir(dst)
		}
	}()
	count := 0
	for {
		e, err := next()
		if err != nil {
			return st, err
		}
		if e == nil {
			return st, nil
		}
		if e.name == "" && e.mode&fs.ModeIrregular != 0 {
			continue
		}
		if count++; count > lim.MaxEntries {
			return st, refuse("more than %d entries", lim.MaxEntries)
		}
		name, err := localName(e.name)
		if err != nil {
			return st, err
		}
		if name == "." {
			continue
		}
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil && path.Dir(name) != "." {
			return st, refuse("entry %q: %v", e.name, err)
		}
		switch {
		case e.mode.IsDir():
			if err := root.MkdirAll(name, 0o755); err != nil {
				return st, refuse("directory %q: %v", e.name, err)
			}
			st.Dirs++
		case e.hardlink:
			target, err := localName(e.linkname)
			if err != nil {
				return st, refuse("hard link %q points outside the archive (%q)", e.name, e.linkname)
			}
			if err := root.Link(target, name); err != nil {
				return st, refuse("hard link %q → %q: %v", e.name, e.linkname, err)
			}
			st.Links++
		case e.mode&fs.ModeSymlink != 0:
			if e.linkname == "" || !rootFS && linkLeaves(name, e.linkname) {
				return st, refuse("symlink %q points outside the archive (%q)", e.name, e.linkname)
			}
			if err := root.Symlink(e.linkname, name); err != nil {
				return st, refuse("symlink %q: %v", e.name, err)
			}
			st.Links++
		case e.mode.IsRegular():
			n, err := writeFile(root, name, e, lim.MaxBytes-st.Bytes)
			st.Bytes += n
			if err != nil {
				return st, err
			}
			st.Files++
		default:
			return st, refuse("entry %q is a %s, which a source archive may not hold", e.name, e.mode.Type())
		}
	}
}

// linkLeaves says whether a symlink at name (a clean path within the archive) with target leads
// out of the archive: an absolute target, or one that climbs above the archive's root.
func linkLeaves(name, target string) bool {
	return path.IsAbs(target) || !filepath.IsLocal(path.Join(path.Dir(name), target))
}

// LinkOutside finds, among what keep keeps of dir (walked as WriteTar walks it), a symlink that a
// source archive may not hold because it leads out of the archive (an absolute target, or one
// that climbs above dir), which extraction refuses: a client checks before it uploads. It
// returns the first one's path (relative, with slashes) and target, or "" when there is none.
func LinkOutside(dir string, keep func(rel string, isDir bool) bool) (rel, target string, err error) {
	err = walkKept(dir, keep, func(p, r string, d fs.DirEntry) error {
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		t, err := os.Readlink(p)
		if err != nil {
			return err
		}
		if linkLeaves(r, filepath.ToSlash(t)) {
			rel, target = r, t
			return filepath.SkipAll
		}
		return nil
	})
	return rel, target, err
}

// walkKept walks what keep keeps of dir (all of it when keep is nil), dir itself aside, calling
// fn with each entry's path and its path relative to dir (with slashes); a directory keep does
// not keep is not walked.
func walkKept(dir string, keep func(rel string, isDir bool) bool, fn func(p, rel string, d fs.DirEntry) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if keep != nil && !keep(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return fn(p, rel, d)
	})
}

// localName is an entry's name as a clean path within the archive, or a refusal.
func localName(name string) (string, error) {
	n := strings.TrimPrefix(strings.ReplaceAll(name, "\\", "/"), "./")
	n = strings.TrimSuffix(n, "/")
	if n == "" || n == "." {
		return ".", nil
	}
	if !filepath.IsLocal(n) || strings.ContainsRune(n, 0) {
		return "", refuse("entry %q escapes the archive's root", name)
	}
	return path.Clean(n), nil
}

func writeFile(root *os.Root, name string, e *entry, budget int64) (int64, error) {
	rc, err := e.open()
	if err != nil {
		return 0, refuse("entry %q: %v", e.name, err)
	}
	defer rc.Close()
	perm := e.mode.Perm()&0o755 | 0o600
	f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return 0, refuse("file %q: %v", e.name, err)
	}
	n, err := io.Copy(f, io.LimitReader(rc, budget+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case n > budget:
		return n, refuse("unpacks to more than the %d bytes allowed (at %q)", budget, e.name)
	case err != nil:
		return n, refuse("entry %q: %v", e.name, err)
	}
	return n, nil
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err == io.EOF {
		err = nil
	}
	return names, err
}

// emptyDir removes what an aborted extraction wrote, keeping dir itself.
func emptyDir(dir string) {
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		os.RemoveAll(filepath.Join(dir, n.Name())) //nolint:errcheck // best effort on a failed build dir
	}
}

// WriteTar writes what keep keeps of dir (paths relative to it, with slashes; a directory it
// does not keep is not walked) to w as a tar stream, without owners: directories, regular files
// and symlinks with their targets; sockets and devices are left out. It returns how many regular
// files it wrote.
func WriteTar(w io.Writer, dir string, keep func(rel string, isDir bool) bool) (int, error) {
	tw := tar.NewWriter(w)
	files := 0
	err := walkKept(dir, keep, func(p, rel string, d fs.DirEntry) error {
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !info.Mode().IsRegular() && !info.IsDir() {
			return nil
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name, h.Uname, h.Gname, h.Uid, h.Gid = rel, "", "", 0, 0
		if info.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		files++
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return files, fmt.Errorf("archive %s: %w", dir, err)
	}
	return files, tw.Close()
}
