package blob

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// metaDir holds one JSON sidecar per object. It is a dot-name so that
// ValidateKey guarantees no object can ever collide with it.
const metaDir = ".meta"

// tmpPrefix marks in-flight uploads; like metaDir it can never be a key
// segment, and List skips it.
const tmpPrefix = ".tmp-"

// LocalBucket stores objects as files under a root directory, one file per
// key, so that a dev can inspect them with ls and cat. All file access goes
// through an os.Root, which refuses paths (including symlinks) that would
// leave the directory, on top of ValidateKey's checks.
//
// Content types live in sidecar files under <root>/.meta. Data and sidecar
// are each replaced atomically but not together, so a reader racing a Put
// may briefly see the new data with the previous content type.
//
// GCS allows both "a" and "a/b" to exist; a directory cannot, so Put fails
// for a key whose path runs through an existing object (or vice versa).
// Proctor's keys are hierarchical by construction, so this does not arise.
type LocalBucket struct {
	root       *os.Root
	dir        string
	baseURL    string
	signingKey []byte
	maxUpload  int64
}

var _ Bucket = (*LocalBucket)(nil)

// NewLocalBucket opens (creating if needed) a bucket rooted at dir, which
// must be absolute.
func NewLocalBucket(dir string, opts Options) (*LocalBucket, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("blob: local bucket dir %q is not absolute", dir)
	}
	if err := os.MkdirAll(filepath.Join(dir, metaDir), 0o755); err != nil {
		return nil, fmt.Errorf("blob: creating local bucket dir: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("blob: opening local bucket dir: %w", err)
	}
	maxUpload := opts.MaxUploadBytes
	if maxUpload <= 0 {
		maxUpload = DefaultMaxUploadBytes
	}
	return &LocalBucket{
		root:       root,
		dir:        dir,
		baseURL:    strings.TrimRight(opts.PublicBaseURL, "/"),
		signingKey: slices.Clone(opts.SigningKey),
		maxUpload:  maxUpload,
	}, nil
}

// Dir returns the bucket's root directory.
func (b *LocalBucket) Dir() string { return b.dir }

type objectMeta struct {
	ContentType string `json:"content_type"`
}

func metaPath(key string) string { return path.Join(metaDir, key+".json") }

// Put writes to a temporary file next to the destination, fsyncs it and
// renames it into place, so a crash or a failing reader never leaves a
// half-written object behind.
func (b *LocalBucket) Put(ctx context.Context, key string, r io.Reader, contentType string) error {
	return b.put(ctx, key, r, contentType, false)
}

// create is Put that refuses (with ErrExists) to replace an object: what a
// signed PUT does, so that a URL writes at most once.
func (b *LocalBucket) create(ctx context.Context, key string, r io.Reader, contentType string) error {
	return b.put(ctx, key, r, contentType, true)
}

func (b *LocalBucket) put(ctx context.Context, key string, r io.Reader, contentType string, createOnly bool) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if contentType == "" {
		contentType = defaultContentType
	}
	if err := b.writeAtomic(ctx, key, r, createOnly); err != nil {
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	meta, err := json.Marshal(objectMeta{ContentType: contentType})
	if err != nil {
		return fmt.Errorf("blob: put %q: encoding metadata: %w", key, err)
	}
	if err := b.writeAtomic(ctx, metaPath(key), strings.NewReader(string(meta)), false); err != nil {
		return fmt.Errorf("blob: put %q: writing metadata: %w", key, err)
	}
	return nil
}

// writeAtomic replaces the file at name (relative to the root) with the
// contents of r. With createOnly it links the finished file into place
// instead, which fails (ErrExists) when name exists, atomically.
func (b *LocalBucket) writeAtomic(ctx context.Context, name string, r io.Reader, createOnly bool) (err error) {
	dir := path.Dir(name)
	if err := b.root.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating parent directory (is a prefix of the key an existing object?): %w", err)
	}
	tmp := path.Join(dir, tmpPrefix+rand.Text())
	f, err := b.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("creating temp file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = b.root.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, ctxReader{ctx: ctx, r: r}); err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing: %w", err)
	}
	if createOnly {
		err := b.root.Link(tmp, name)
		_ = b.root.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			return ErrExists
		}
		if err != nil {
			return fmt.Errorf("linking into place (is the key an existing prefix of other objects?): %w", err)
		}
	} else if err := b.root.Rename(tmp, name); err != nil {
		return fmt.Errorf("renaming into place (is the key an existing prefix of other objects?): %w", err)
	}
	// Make the rename itself durable; the data already is.
	if d, err := b.root.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// Compose concatenates the source files into a temporary file and renames it
// over dst, so readers see the old object or the whole new one.
func (b *LocalBucket) Compose(ctx context.Context, dst string, srcs []string, contentType string) error {
	if err := ValidateKey(dst); err != nil {
		return err
	}
	if len(srcs) == 0 {
		return fmt.Errorf("blob: compose %q: no sources", dst)
	}
	readers := make([]io.Reader, 0, len(srcs))
	for _, src := range srcs {
		if err := ValidateKey(src); err != nil {
			return err
		}
		f, _, err := b.open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		readers = append(readers, f)
	}
	return b.Put(ctx, dst, io.MultiReader(readers...), contentType)
}

// Get opens the object's file for streaming.
func (b *LocalBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	f, _, err := b.open(key)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// open returns the object's file and attributes, for Get and the HTTP
// handler (which needs both to serve ranges and headers).
func (b *LocalBucket) open(key string) (*os.File, Attrs, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Attrs{}, err
	}
	f, err := b.root.Open(key)
	if err != nil {
		return nil, Attrs{}, b.mapErr("get", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, Attrs{}, fmt.Errorf("blob: get %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, Attrs{}, fmt.Errorf("blob: get %q: %w", key, ErrNotFound)
	}
	attrs, err := b.attrs(key, fi)
	if err != nil {
		_ = f.Close()
		return nil, Attrs{}, err
	}
	return f, attrs, nil
}

// Stat reports the object's size, content type and modification time.
func (b *LocalBucket) Stat(ctx context.Context, key string) (Attrs, error) {
	if err := ValidateKey(key); err != nil {
		return Attrs{}, err
	}
	fi, err := b.root.Stat(key)
	if err != nil {
		return Attrs{}, b.mapErr("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return Attrs{}, fmt.Errorf("blob: stat %q: %w", key, ErrNotFound)
	}
	return b.attrs(key, fi)
}

func (b *LocalBucket) attrs(key string, fi fs.FileInfo) (Attrs, error) {
	ct := defaultContentType
	raw, err := b.root.ReadFile(metaPath(key))
	switch {
	case err == nil:
		var m objectMeta
		if err := json.Unmarshal(raw, &m); err != nil {
			return Attrs{}, fmt.Errorf("blob: reading metadata of %q: %w", key, err)
		}
		if m.ContentType != "" {
			ct = m.ContentType
		}
	case errors.Is(err, fs.ErrNotExist):
		// Objects copied into the directory by hand have no sidecar.
	default:
		return Attrs{}, fmt.Errorf("blob: reading metadata of %q: %w", key, err)
	}
	return Attrs{Key: key, Size: fi.Size(), ContentType: ct, Updated: fi.ModTime().UTC()}, nil
}

// Delete removes the object and its metadata.
func (b *LocalBucket) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	fi, err := b.root.Lstat(key)
	if err != nil {
		if errors.Is(b.mapErr("delete", key, err), ErrNotFound) {
			return nil
		}
		return fmt.Errorf("blob: delete %q: %w", key, err)
	}
	// A directory at the key is a prefix of other objects, not an object.
	if fi.IsDir() {
		return nil
	}
	if err := b.root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blob: delete %q: %w", key, err)
	}
	if err := b.root.Remove(metaPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blob: delete metadata of %q: %w", key, err)
	}
	return nil
}

// List walks only the directory implied by prefix, so listing one build's
// files does not scan the whole bucket.
func (b *LocalBucket) List(ctx context.Context, prefix string) ([]Attrs, error) {
	start := "."
	if i := strings.LastIndex(prefix, "/"); i > 0 {
		start = prefix[:i]
		if err := ValidateKey(start); err != nil {
			return nil, fmt.Errorf("blob: list prefix %q: %w", prefix, err)
		}
	}
	var out []Attrs
	err := fs.WalkDir(b.root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p != start && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(p, prefix) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while we walked
		}
		if err != nil {
			return err
		}
		a, err := b.attrs(p, fi)
		if err != nil {
			return err
		}
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("blob: list %q: %w", prefix, err)
	}
	// WalkDir orders by path segment ("a/b" before "a.b"); GCS orders by
	// the whole key as a byte string. Match GCS.
	slices.SortFunc(out, func(x, y Attrs) int { return strings.Compare(x.Key, y.Key) })
	return out, nil
}

// Close releases the directory handle.
func (b *LocalBucket) Close() error {
	if err := b.root.Close(); err != nil {
		return fmt.Errorf("blob: closing local bucket: %w", err)
	}
	return nil
}

// mapErr turns "no such file" and "a path component is a file" into
// ErrNotFound: both mean the object does not exist.
func (b *LocalBucket) mapErr(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("blob: %s %q: %w", op, key, ErrNotFound)
	}
	return fmt.Errorf("blob: %s %q: %w", op, key, err)
}

// ctxReader stops a copy promptly when ctx is cancelled, so an abandoned
// upload does not keep writing.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
