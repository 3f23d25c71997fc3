// Package blob stores opaque objects (build sources, workspace archives, task
// attachments, data files, trace artifacts) behind one Bucket interface.
//
// Two backends exist: a local directory for dev and single-machine installs,
// and Google Cloud Storage for production. Callers pick one with a URL
// (PROCTOR_BLOB_URL: file:///abs/dir or gs://bucket/optional/prefix) and
// never branch on which they got. Presigned URLs follow the same rule: GCS V4
// signed URLs in production, HMAC-signed URLs served by LocalBucket.Handler
// in dev; clients just GET or PUT the URL they are handed.
//
// The package may import the standard library, cloud.google.com/go/storage
// and google.golang.org/api; it must not import other proctor packages, so
// that anything (API server, workers, CLI tools) can depend on it.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/api/option"
)

// Bucket is a flat namespace of objects addressed by slash-separated keys.
// Implementations are safe for concurrent use.
type Bucket interface {
	// Put stores the contents of r under key, replacing any existing object.
	// Readers never observe a partially written object: if r fails or ctx is
	// cancelled, the previous object (or absence) is left in place.
	Put(ctx context.Context, key string, r io.Reader, contentType string) error
	// Get opens the object for reading. It returns ErrNotFound if absent.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat returns the object's attributes, or ErrNotFound.
	Stat(ctx context.Context, key string) (Attrs, error)
	// Delete removes the object. Deleting an absent object is not an error,
	// so that retried cleanups converge.
	Delete(ctx context.Context, key string) error
	// List returns the objects whose keys start with prefix (a plain string
	// prefix, not necessarily ending in "/"), sorted by key.
	List(ctx context.Context, prefix string) ([]Attrs, error)
	// Compose writes the concatenation of the objects srcs (in order, at
	// least one) to dst, replacing it atomically, with contentType. The
	// sources stay. It is how multipart uploads are joined.
	Compose(ctx context.Context, dst string, srcs []string, contentType string) error
	// SignedURL returns a URL that lets a client without credentials perform
	// method (GET or PUT) on key until expires from now has passed. A PUT URL
	// only creates: it is refused while an object exists at key, so the bytes
	// a caller verified after the upload cannot be replaced through it (see
	// Retire for keeping it from writing again after a delete).
	SignedURL(ctx context.Context, key string, method string, expires time.Duration) (string, error)
	// Close releases resources held by the bucket.
	Close() error
}

// SignedURLOrigin is the origin (scheme and host) of the URLs b signs, for a
// browser's Content-Security-Policy, when they point elsewhere than the API
// server; "" for a bucket whose URLs are the server's own (LocalBucket's,
// under /blob/).
func SignedURLOrigin(b Bucket) string {
	if o, ok := b.(interface{ SignedURLOrigin() string }); ok {
		return o.SignedURLOrigin()
	}
	return ""
}

// Attrs describes a stored object.
type Attrs struct {
	Key         string
	Size        int64
	ContentType string
	Updated     time.Time
}

// ErrNotFound is returned (possibly wrapped) when an object does not exist.
var ErrNotFound = errors.New("blob: not found")

// ErrExists is returned when a create-only write (a signed PUT) finds an
// object at its key.
var ErrExists = errors.New("blob: object already exists")

// RetiredContentType marks the empty object Retire leaves.
const RetiredContentType = "application/x-proctor-retired"

// Retire replaces the object at key with an empty placeholder instead of
// deleting it. A signed PUT URL only creates, so while the placeholder is
// there a URL handed out for key cannot write again: use Retire rather than
// Delete for a key whose PUT URL may still be live and whose bytes nothing
// should hold any more (a deleted or settled upload). The placeholder is
// zero bytes; a sweep may delete it once the URL has expired.
func Retire(ctx context.Context, b Bucket, key string) error {
	return b.Put(ctx, key, strings.NewReader(""), RetiredContentType)
}

// Options configures Open. Fields that do not apply to the chosen backend
// are ignored.
type Options struct {
	// PublicBaseURL is where the API server is reachable by clients, e.g.
	// http://127.0.0.1:8080. The local bucket builds signed URLs under
	// <PublicBaseURL>/blob/.
	PublicBaseURL string
	// SigningKey is the HMAC key for local signed URLs. Keep it secret and
	// stable across restarts, or outstanding URLs stop working.
	SigningKey []byte
	// MaxUploadBytes caps the body of a PUT through a local signed URL.
	// Zero means DefaultMaxUploadBytes.
	MaxUploadBytes int64

	// GCSClientOptions are passed to storage.NewClient, e.g. to point the
	// client at a fake server or supply explicit credentials.
	GCSClientOptions []option.ClientOption
	// GCSGoogleAccessID and GCSPrivateKey (PEM) sign GCS URLs with a
	// service-account key. When unset, the client's credentials are used
	// (a service-account JSON key, or the IAM signBlob API on GCP).
	GCSGoogleAccessID string
	GCSPrivateKey     []byte
}

// DefaultMaxUploadBytes is the PUT size cap used when
// Options.MaxUploadBytes is zero.
const DefaultMaxUploadBytes int64 = 5 << 30

// MaxSignedURLExpiry is the longest lifetime a signed URL may have. It is
// the GCS V4 limit, applied to both backends so that dev behaves like
// production.
const MaxSignedURLExpiry = 7 * 24 * time.Hour

// MaxKeyLength is the longest key accepted, in bytes (the GCS object name
// limit).
const MaxKeyLength = 1024

// defaultContentType is stored when Put is given none. GCS would otherwise
// sniff the content; a fixed default keeps both backends identical.
const defaultContentType = "application/octet-stream"

// Open returns the bucket that rawURL names: file:///abs/dir for a local
// directory (created if missing) or gs://bucket[/prefix] for GCS.
func Open(ctx context.Context, rawURL string, opts Options) (Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("blob: parsing bucket URL: %w", err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("blob: file URL %q names host %q; want file:///absolute/path", rawURL, u.Host)
		}
		if u.Path == "" || !strings.HasPrefix(u.Path, "/") {
			return nil, fmt.Errorf("blob: file URL %q needs an absolute path, e.g. file:///var/lib/proctor/blobs", rawURL)
		}
		return NewLocalBucket(u.Path, opts)
	case "gs":
		if u.Host == "" {
			return nil, fmt.Errorf("blob: gs URL %q has no bucket name; want gs://bucket[/prefix]", rawURL)
		}
		return NewGCSBucket(ctx, u.Host, strings.Trim(u.Path, "/"), opts)
	case "":
		return nil, fmt.Errorf("blob: bucket URL %q has no scheme; want file:///abs/dir or gs://bucket[/prefix]", rawURL)
	default:
		return nil, fmt.Errorf("blob: unsupported bucket URL scheme %q; want file or gs", u.Scheme)
	}
}

// ValidateKey reports whether key is acceptable to every backend.
//
// Keys are slash-separated paths of non-empty segments. The rules exist
// mostly for the local backend, where a key becomes a file path and must
// never escape the root directory, but they apply everywhere so that a key
// that works in dev works in production and vice versa. Segments may not
// start with "." because that rules out "." and ".." and reserves dot-names
// for the local backend's bookkeeping (metadata sidecars, in-flight uploads).
func ValidateKey(key string) error {
	switch {
	case key == "":
		return errors.New("blob: empty key")
	case len(key) > MaxKeyLength:
		return fmt.Errorf("blob: key is %d bytes, longer than the %d allowed", len(key), MaxKeyLength)
	case !utf8.ValidString(key):
		return fmt.Errorf("blob: key %q is not valid UTF-8", key)
	case strings.HasPrefix(key, "/"):
		return fmt.Errorf("blob: key %q is absolute; keys are relative paths", key)
	case strings.Contains(key, `\`):
		return fmt.Errorf("blob: key %q contains a backslash", key)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("blob: key %q contains a control character", key)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" {
			return fmt.Errorf("blob: key %q has an empty path segment", key)
		}
		if strings.HasPrefix(seg, ".") {
			return fmt.Errorf("blob: key %q has segment %q starting with '.'", key, seg)
		}
	}
	return nil
}

// checkSignRequest validates the arguments common to both SignedURL
// implementations and returns the canonical method.
func checkSignRequest(key, method string, expires time.Duration) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	m := strings.ToUpper(method)
	if m != http.MethodGet && m != http.MethodPut {
		return "", fmt.Errorf("blob: cannot sign method %q; want GET or PUT", method)
	}
	if expires <= 0 || expires > MaxSignedURLExpiry {
		return "", fmt.Errorf("blob: signed URL expiry %v out of range (0, %v]", expires, MaxSignedURLExpiry)
	}
	return m, nil
}

// Download copies the object at key into a new file at path.
func Download(ctx context.Context, b Bucket, key, path string) error {
	rc, err := b.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Upload stores the file at path under key.
func Upload(ctx context.Context, b Bucket, key, path, contentType string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return b.Put(ctx, key, f, contentType)
}
