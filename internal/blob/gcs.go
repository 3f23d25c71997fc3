package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
)

// GCSBucket stores objects in a Google Cloud Storage bucket, optionally
// under a name prefix so several installs can share one bucket.
//
// STORAGE_EMULATOR_HOST is honoured by the client library itself, which is
// how local emulators are used.
type GCSBucket struct {
	client   *storage.Client
	bucket   *storage.BucketHandle
	name     string
	prefix   string // "" or ends in "/"
	accessID string
	privKey  []byte
}

var _ Bucket = (*GCSBucket)(nil)

// NewGCSBucket connects to bucket. prefix, if not empty, is prepended (with
// a "/") to every key and hidden from callers.
//
// No request is made here: a missing bucket or bad credentials surface on
// first use, so the API server can start while GCS is briefly unreachable.
func NewGCSBucket(ctx context.Context, bucket, prefix string, opts Options) (*GCSBucket, error) {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("blob: gs://%s/%s: invalid prefix: %w", bucket, prefix, err)
		}
		prefix += "/"
	}
	client, err := storage.NewClient(ctx, opts.GCSClientOptions...)
	if err != nil {
		return nil, fmt.Errorf("blob: creating GCS client: %w", err)
	}
	return &GCSBucket{
		client:   client,
		bucket:   client.Bucket(bucket),
		name:     bucket,
		prefix:   prefix,
		accessID: opts.GCSGoogleAccessID,
		privKey:  slices.Clone(opts.GCSPrivateKey),
	}, nil
}

func (b *GCSBucket) object(key string) (*storage.ObjectHandle, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	return b.bucket.Object(b.prefix + key), nil
}

// Put uploads via a storage.Writer. GCS only creates the object when the
// upload completes, so cancelling the writer's context on a read error is
// enough to leave the previous object untouched.
func (b *GCSBucket) Put(ctx context.Context, key string, r io.Reader, contentType string) error {
	obj, err := b.object(key)
	if err != nil {
		return err
	}
	if contentType == "" {
		contentType = defaultContentType
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.NewWriter(ctx)
	w.ContentType = contentType
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		_ = w.Close()
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	return nil
}

// maxComposeSources is how many objects one GCS compose request may join.
const maxComposeSources = 32

// Compose joins the sources with GCS compose requests, 32 at a time: the
// first batch into dst, then dst and the next 31 into dst again. Each
// request replaces dst atomically; a failure part-way leaves a dst that
// callers must not use (they compose again or delete it).
func (b *GCSBucket) Compose(ctx context.Context, dst string, srcs []string, contentType string) error {
	out, err := b.object(dst)
	if err != nil {
		return err
	}
	if len(srcs) == 0 {
		return fmt.Errorf("blob: compose %q: no sources", dst)
	}
	if contentType == "" {
		contentType = defaultContentType
	}
	handles := make([]*storage.ObjectHandle, len(srcs))
	for i, src := range srcs {
		if handles[i], err = b.object(src); err != nil {
			return err
		}
	}
	for done := 0; done < len(handles); {
		batch := []*storage.ObjectHandle{}
		if done > 0 {
			batch = append(batch, out)
		}
		n := min(maxComposeSources-len(batch), len(handles)-done)
		batch = append(batch, handles[done:done+n]...)
		c := out.ComposerFrom(batch...)
		c.ContentType = contentType
		if _, err := c.Run(ctx); err != nil {
			return b.mapErr("compose", dst, err)
		}
		done += n
	}
	return nil
}

// Get streams the object's contents.
func (b *GCSBucket) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	obj, err := b.object(key)
	if err != nil {
		return nil, err
	}
	rc, err := obj.NewReader(ctx)
	if err != nil {
		return nil, b.mapErr("get", key, err)
	}
	return rc, nil
}

// Stat fetches the object's metadata.
func (b *GCSBucket) Stat(ctx context.Context, key string) (Attrs, error) {
	obj, err := b.object(key)
	if err != nil {
		return Attrs{}, err
	}
	oa, err := obj.Attrs(ctx)
	if err != nil {
		return Attrs{}, b.mapErr("stat", key, err)
	}
	return b.attrs(oa), nil
}

func (b *GCSBucket) attrs(oa *storage.ObjectAttrs) Attrs {
	return Attrs{
		Key:         strings.TrimPrefix(oa.Name, b.prefix),
		Size:        oa.Size,
		ContentType: oa.ContentType,
		Updated:     oa.Updated.UTC(),
	}
}

// Delete removes the object; an absent object is not an error.
func (b *GCSBucket) Delete(ctx context.Context, key string) error {
	obj, err := b.object(key)
	if err != nil {
		return err
	}
	if err := obj.Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("blob: delete %q: %w", key, err)
	}
	return nil
}

// List pages through every object under prefix. Listings are expected to be
// per-build or per-run (tens to thousands of objects), so collecting them in
// memory is fine.
func (b *GCSBucket) List(ctx context.Context, prefix string) ([]Attrs, error) {
	q := &storage.Query{Prefix: b.prefix + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "ContentType", "Updated"}); err != nil {
		return nil, fmt.Errorf("blob: list %q: %w", prefix, err)
	}
	it := b.bucket.Objects(ctx, q)
	var out []Attrs
	for {
		oa, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("blob: list %q: %w", prefix, err)
		}
		out = append(out, b.attrs(oa))
	}
	return out, nil
}

// createOnlyParam is the precondition that makes a signed PUT create only.
const createOnlyParam = "x-goog-if-generation-match"

// SignedURL returns a V4 signed URL. Signing needs a service-account
// identity: Options.GCSGoogleAccessID with GCSPrivateKey, a service-account
// JSON key in the client's credentials, or the GCP metadata server (which
// signs via the IAM signBlob API).
func (b *GCSBucket) SignedURL(ctx context.Context, key string, method string, expires time.Duration) (string, error) {
	m, err := checkSignRequest(key, method, expires)
	if err != nil {
		return "", err
	}
	opts := &storage.SignedURLOptions{
		Scheme:         storage.SigningSchemeV4,
		Method:         m,
		Expires:        time.Now().Add(expires),
		GoogleAccessID: b.accessID,
		PrivateKey:     b.privKey,
	}
	if m == http.MethodPut {
		// Create-only, as on the local bucket: GCS refuses the PUT (412)
		// once any generation of the object exists. V4 signs every query
		// parameter, so the client cannot strip it.
		opts.QueryParameters = url.Values{createOnlyParam: {"0"}}
	}
	u, err := b.bucket.SignedURL(b.prefix+key, opts)
	if err != nil {
		return "", fmt.Errorf("blob: signing GCS URL for %q (needs service-account credentials: set a key or run with a GCP service account): %w", key, err)
	}
	return u, nil
}

// SignedURLOrigin is where SignedURL's URLs point. It signs a URL to see
// (the client's endpoint decides the host); when it cannot sign, it names the
// emulator's host (STORAGE_EMULATOR_HOST) or else Cloud Storage's.
func (b *GCSBucket) SignedURLOrigin() string {
	if raw, err := b.SignedURL(context.Background(), "origin-probe", http.MethodGet, time.Minute); err == nil {
		if u, err := url.Parse(raw); err == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
	}
	if host := os.Getenv("STORAGE_EMULATOR_HOST"); host != "" {
		if strings.Contains(host, "://") {
			return strings.TrimRight(host, "/")
		}
		return "http://" + host
	}
	return "https://storage.googleapis.com"
}

// Close closes the underlying client.
func (b *GCSBucket) Close() error {
	if err := b.client.Close(); err != nil {
		return fmt.Errorf("blob: closing GCS client: %w", err)
	}
	return nil
}

func (b *GCSBucket) mapErr(op, key string, err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("blob: %s %q: %w", op, key, ErrNotFound)
	}
	return fmt.Errorf("blob: %s %q: %w", op, key, err)
}
