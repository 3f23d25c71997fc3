package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// member is one entry of a test archive.
type member struct {
	name, body, link string
	typ              byte // tar type flag; 0 is a regular file
	mode             int64
	size             int64 // for a bomb: a body of this many zero bytes
}

func tarGz(t *testing.T, ms ...member) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Linkname: m.link, Typeflag: m.typ, Mode: m.mode}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		body := []byte(m.body)
		if m.size > 0 {
			body = make([]byte, m.size)
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	tw.Close()
	gz.Close()
	return writeTemp(t, buf.Bytes())
}

func zipFile(t *testing.T, ms ...member) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range ms {
		h := &zip.FileHeader{Name: m.name, Method: zip.Deflate}
		body := m.body
		if m.typ == tar.TypeSymlink {
			h.SetMode(fs.ModeSymlink | 0o777)
			body = m.link
		}
		if m.size > 0 {
			body = strings.Repeat("\x00", int(m.size))
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	zw.Close()
	return writeTemp(t, buf.Bytes())
}

func writeTemp(t *testing.T, b []byte) string {
	p := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExtractUnpacksAnOrdinaryTree(t *testing.T) {
	for name, src := range map[string]string{
		"tar.gz": tarGz(t, member{name: "./main.go", body: "package main"}, member{name: "cmd/", typ: tar.TypeDir},
			member{name: "cmd/run.sh", body: "#!/bin/sh", mode: 0o755}, member{name: "cmd/link", link: "run.sh", typ: tar.TypeSymlink},
			member{name: "cmd/hard", link: "cmd/run.sh", typ: tar.TypeLink}),
		"zip": zipFile(t, member{name: "main.go", body: "package main"}, member{name: "cmd/run.sh", body: "#!/bin/sh"},
			member{name: "cmd/link", link: "run.sh", typ: tar.TypeSymlink}),
	} {
		t.Run(name, func(t *testing.T) {
			dst := t.TempDir()
			st, err := ExtractFile(src, dst, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dst, "cmd", "link")); err != nil || string(b) != "#!/bin/sh" {
				t.Errorf("through the symlink: %q %v", b, err)
			}
			if b, _ := os.ReadFile(filepath.Join(dst, "main.go")); string(b) != "package main" || st.Files < 2 {
				t.Errorf("main.go = %q, stats %+v", b, st)
			}
			if name == "tar.gz" {
				if fi, err := os.Stat(filepath.Join(dst, "cmd", "run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
					t.Errorf("an executable lost its bit: %v %v", fi, err)
				}
			}
		})
	}
}

func TestExtractRefusesHostileArchives(t *testing.T) {
	outside := t.TempDir()
	small := Limits{MaxBytes: 10 << 20, MaxEntries: 50}
	many := make([]member, 60)
	for i := range many {
		many[i] = member{name: strings.Repeat("d/", i%5) + "f" + string(rune('a'+i%26)) + string(rune('a'+i/26)), body: "x"}
	}
	for name, tc := range map[string]struct {
		src  string
		lim  Limits
		want string
	}{
		"zip-slip tar":          {tarGz(t, member{name: "ok.txt", body: "x"}, member{name: "../../escaped", body: "x"}), small, "escapes the archive's root"},
		"absolute tar":          {tarGz(t, member{name: outside + "/abs", body: "x"}), small, "escapes the archive's root"},
		"zip-slip zip":          {zipFile(t, member{name: "../escaped", body: "x"}), small, "escapes the archive's root"},
		"symlink out, absolute": {tarGz(t, member{name: "lnk", link: outside, typ: tar.TypeSymlink}, member{name: "lnk/file", body: "x"}), small, "points outside"},
		"symlink out, relative": {tarGz(t, member{name: "a/rel", link: "../..", typ: tar.TypeSymlink}, member{name: "a/rel/file", body: "x"}), small, "points outside"},
		"symlink out, zip":      {zipFile(t, member{name: "lnk", link: "../../etc", typ: tar.TypeSymlink}), small, "points outside"},
		"hard link out":         {tarGz(t, member{name: "h", link: "../../../etc/passwd", typ: tar.TypeLink}), small, "points outside"},
		"bomb tar.gz":           {tarGz(t, member{name: "zeros", size: 50 << 20}), small, "more than the"},
		"bomb zip":              {zipFile(t, member{name: "zeros", size: 50 << 20}), small, "more than the"},
		"too many entries":      {tarGz(t, many...), small, "more than 50 entries"},
		"a device":              {tarGz(t, member{name: "null", typ: tar.TypeChar}), small, "may not hold"},
		"not an archive":        {writeTemp(t, []byte("just text")), small, "not a tar"},
		"truncated gzip":        {writeTemp(t, []byte{0x1f, 0x8b, 8, 0, 0, 0}), small, "gzip"},
	} {
		t.Run(name, func(t *testing.T) {
			dst := t.TempDir()
			_, err := ExtractFile(tc.src, dst, tc.lim)
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a refusal saying %q", err, tc.want)
			}
			if left, _ := os.ReadDir(dst); len(left) != 0 {
				t.Errorf("a refused archive left %d entries in the build dir", len(left))
			}
		})
	}
	if left, _ := os.ReadDir(outside); len(left) != 0 {
		t.Errorf("something was written outside the build dir: %v", left)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "escaped")); err == nil {
		t.Error("a zip-slip entry escaped")
	}
}

// An image's root file system keeps its links whatever they point to (they resolve in the image's
// root where it runs), but nothing is written through one out of the tree.
func TestExtractRootFSKeepsAnImagesLinksAndWritesNothingThroughThem(t *testing.T) {
	outside := t.TempDir()
	open := func(src string) io.Reader {
		t.Helper()
		f, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		return gz
	}
	dst := t.TempDir()
	src := tarGz(t, member{name: "lib64/ld-linux-x86-64.so.2", link: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", typ: tar.TypeSymlink},
		member{name: "usr/bin/up", link: "../../../../../bin/busybox", typ: tar.TypeSymlink}, member{name: "bin/busybox", body: "x", mode: 0o755})
	if _, err := ExtractRootFS(open(src), dst, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	for link, want := range map[string]string{"lib64/ld-linux-x86-64.so.2": "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "usr/bin/up": "../../../../../bin/busybox"} {
		if got, err := os.Readlink(filepath.Join(dst, link)); err != nil || got != want {
			t.Errorf("%s → %q, %v; want %q", link, got, err, want)
		}
	}
	for name, src := range map[string]string{
		"through an absolute link": tarGz(t, member{name: "lnk", link: outside, typ: tar.TypeSymlink}, member{name: "lnk/file", body: "x"}),
		"through a relative link":  tarGz(t, member{name: "a/rel", link: "../../../../../../../../" + outside, typ: tar.TypeSymlink}, member{name: "a/rel/file", body: "x"}),
		"zip-slip":                 tarGz(t, member{name: "../../escaped", body: "x"}),
	} {
		if _, err := ExtractRootFS(open(src), t.TempDir(), DefaultLimits); err == nil {
			t.Errorf("%s: extracted, want a refusal", name)
		}
	}
	if left, _ := os.ReadDir(outside); len(left) != 0 {
		t.Errorf("something was written outside the tree: %v", left)
	}
}

func TestReadFileReadsOneFileWithinItsBound(t *testing.T) {
	for name, src := range map[string]string{
		"tar.gz": tarGz(t, member{name: "./cmd/", typ: tar.TypeDir}, member{name: "./cmd/main.go", body: "package main"}, member{name: "big", size: 1000}),
		"zip":    zipFile(t, member{name: "cmd/main.go", body: "package main"}, member{name: "big", size: 1000}),
	} {
		if b, err := ReadFile(src, "cmd/main.go", 100); err != nil || string(b) != "package main" {
			t.Errorf("%s: cmd/main.go = %q, %v", name, b, err)
		}
		if _, err := ReadFile(src, "big", 100); !errors.Is(err, ErrUnsafe) {
			t.Errorf("%s: a file over the bound: %v", name, err)
		}
		if _, err := ReadFile(src, "cmd/none.go", 100); !errors.Is(err, ErrNoEntry) {
			t.Errorf("%s: a missing file: %v", name, err)
		}
	}
}

// LinkOutside finds what extraction would refuse, before an upload: a link out of the folder
// (absolute, or climbing above it), not one within it nor one a keep predicate leaves out.
func TestLinkOutsideFindsTheLinksASourceMayNotHold(t *testing.T) {
	for _, tc := range []struct {
		name, link, target string
		keep               func(string, bool) bool
		want               string
	}{
		{"within", "lib/cur", "../bin/x", nil, ""},
		{"absolute", "lib64", "/usr/lib64", nil, "lib64"},
		{"climbing", "lib/up", "../../etc/passwd", nil, "lib/up"},
		{"ignored", "lib64", "/usr/lib64", func(rel string, _ bool) bool { return rel != "lib64" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"lib", "bin"} {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(tc.target, filepath.Join(dir, tc.link)); err != nil {
				t.Fatal(err)
			}
			rel, target, err := LinkOutside(dir, tc.keep)
			if err != nil || rel != tc.want || (rel != "" && target != tc.target) {
				t.Fatalf("LinkOutside = %q → %q, %v; want %q", rel, target, err, tc.want)
			}
			// Extraction agrees: what LinkOutside finds, an upload of the tree is refused for.
			var buf bytes.Buffer
			if _, err := WriteTar(&buf, dir, tc.keep); err != nil {
				t.Fatal(err)
			}
			_, err = ExtractTar(&buf, t.TempDir(), Limits{MaxBytes: 1 << 20, MaxEntries: 100})
			if (err != nil) != (tc.want != "") {
				t.Errorf("extracting the tree: %v (LinkOutside found %q)", err, rel)
			}
		})
	}
}
