package blob_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/blob"
)

// testContract is the behaviour every Bucket must have. Callers pick a
// backend by URL and must never be able to tell which one they got, so
// each backend runs this same suite.
func testContract(t *testing.T, newBucket func(t *testing.T) blob.Bucket) {
	t.Run("PutThenGetReturnsTheBytes", func(t *testing.T) {
		b := newBucket(t)
		ctx := t.Context()
		want := []byte("hello, blob")
		mustPut(t, b, "builds/b1/source.tar.gz", want, "application/gzip")

		if got := mustGet(t, b, "builds/b1/source.tar.gz"); !bytes.Equal(got, want) {
			t.Errorf("Get = %q, want %q", got, want)
		}

		before := time.Now().Add(-time.Minute)
		attrs, err := b.Stat(ctx, "builds/b1/source.tar.gz")
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if attrs.Key != "builds/b1/source.tar.gz" || attrs.Size != int64(len(want)) || attrs.ContentType != "application/gzip" {
			t.Errorf("Stat = %+v, want key, size %d and content type application/gzip", attrs, len(want))
		}
		if attrs.Updated.Before(before) || attrs.Updated.After(time.Now().Add(time.Minute)) {
			t.Errorf("Stat.Updated = %v, want about now", attrs.Updated)
		}
	})

	t.Run("ComposeConcatenatesInOrder", func(t *testing.T) {
		b := newBucket(t)
		// 40 parts: more than one GCS compose request joins.
		var want []byte
		var parts []string
		for i := range 40 {
			key := fmt.Sprintf("up/x.parts/%05d", i)
			data := []byte(fmt.Sprintf("part %d;", i))
			mustPut(t, b, key, data, "application/octet-stream")
			want = append(want, data...)
			parts = append(parts, key)
		}
		mustPut(t, b, "up/x", []byte("stale"), "text/plain")
		if err := b.Compose(t.Context(), "up/x", parts, "text/csv"); err != nil {
			t.Fatalf("Compose: %v", err)
		}
		if got := mustGet(t, b, "up/x"); !bytes.Equal(got, want) {
			t.Errorf("composed = %q, want %q", got, want)
		}
		if attrs, err := b.Stat(t.Context(), "up/x"); err != nil || attrs.Size != int64(len(want)) || attrs.ContentType != "text/csv" {
			t.Errorf("Stat = %+v, %v", attrs, err)
		}
		if got := mustGet(t, b, parts[0]); string(got) != "part 0;" {
			t.Errorf("a source after compose = %q", got)
		}
		if err := b.Compose(t.Context(), "up/y", []string{"up/missing"}, ""); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Compose of a missing source = %v, want ErrNotFound", err)
		}
	})

	t.Run("PutReplacesExistingObject", func(t *testing.T) {
		b := newBucket(t)
		mustPut(t, b, "k", []byte("first version"), "text/plain")
		mustPut(t, b, "k", []byte("v2"), "application/json")
		if got := mustGet(t, b, "k"); string(got) != "v2" {
			t.Errorf("Get after overwrite = %q, want %q", got, "v2")
		}
		attrs, err := b.Stat(t.Context(), "k")
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if attrs.Size != 2 || attrs.ContentType != "application/json" {
			t.Errorf("Stat after overwrite = %+v, want size 2, application/json", attrs)
		}
	})

	t.Run("EmptyContentTypeMeansOctetStream", func(t *testing.T) {
		b := newBucket(t)
		mustPut(t, b, "data.bin", []byte("<html>not sniffed</html>"), "")
		attrs, err := b.Stat(t.Context(), "data.bin")
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if attrs.ContentType != "application/octet-stream" {
			t.Errorf("ContentType = %q, want application/octet-stream", attrs.ContentType)
		}
	})

	t.Run("EmptyObjectsAreObjects", func(t *testing.T) {
		b := newBucket(t)
		mustPut(t, b, "empty", nil, "text/plain")
		if got := mustGet(t, b, "empty"); len(got) != 0 {
			t.Errorf("Get(empty) = %q, want no bytes", got)
		}
	})

	t.Run("MissingObjectsAreErrNotFound", func(t *testing.T) {
		b := newBucket(t)
		ctx := t.Context()
		mustPut(t, b, "dir/present", []byte("x"), "")

		for _, key := range []string{"absent", "dir/absent", "dir", "dir/present/below"} {
			if _, err := b.Get(ctx, key); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Get(%q) error = %v, want ErrNotFound", key, err)
			}
			if _, err := b.Stat(ctx, key); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Stat(%q) error = %v, want ErrNotFound", key, err)
			}
		}
	})

	t.Run("DeleteIsIdempotent", func(t *testing.T) {
		b := newBucket(t)
		ctx := t.Context()
		mustPut(t, b, "runs/r1/trace.json", []byte("{}"), "application/json")

		for i := range 2 {
			if err := b.Delete(ctx, "runs/r1/trace.json"); err != nil {
				t.Fatalf("Delete #%d: %v", i+1, err)
			}
		}
		if _, err := b.Stat(ctx, "runs/r1/trace.json"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat after Delete error = %v, want ErrNotFound", err)
		}
		if err := b.Delete(ctx, "never/existed"); err != nil {
			t.Errorf("Delete of a never-existing key = %v, want nil", err)
		}
	})

	t.Run("ListMatchesStringPrefixInKeyOrder", func(t *testing.T) {
		b := newBucket(t)
		ctx := t.Context()
		for _, k := range []string{"builds/1/b", "builds/1/a", "builds/10/c", "builds/1.x", "runs/x"} {
			mustPut(t, b, k, []byte(k), "text/plain")
		}

		cases := []struct {
			prefix string
			want   []string
		}{
			{"builds/1/", []string{"builds/1/a", "builds/1/b"}},
			// A prefix is a string prefix, not a directory.
			{"builds/1", []string{"builds/1.x", "builds/1/a", "builds/1/b", "builds/10/c"}},
			{"", []string{"builds/1.x", "builds/1/a", "builds/1/b", "builds/10/c", "runs/x"}},
			{"nothing/here/", nil},
			{"runs/x", []string{"runs/x"}},
		}
		for _, c := range cases {
			got, err := b.List(ctx, c.prefix)
			if err != nil {
				t.Fatalf("List(%q): %v", c.prefix, err)
			}
			if keys := keysOf(got); !slices.Equal(keys, c.want) {
				t.Errorf("List(%q) = %q, want %q", c.prefix, keys, c.want)
			}
		}

		got, err := b.List(ctx, "runs/")
		if err != nil || len(got) != 1 {
			t.Fatalf("List(runs/) = %v, %v; want one object", got, err)
		}
		if got[0].Size != int64(len("runs/x")) || got[0].ContentType != "text/plain" || got[0].Updated.IsZero() {
			t.Errorf("List attrs = %+v, want size, content type and update time filled in", got[0])
		}
	})

	t.Run("InvalidKeysAreRejectedByEveryMethod", func(t *testing.T) {
		b := newBucket(t)
		ctx := t.Context()
		for _, key := range invalidKeys {
			if err := b.Put(ctx, key, strings.NewReader("x"), ""); err == nil {
				t.Errorf("Put(%q) succeeded, want error", key)
			}
			if _, err := b.Get(ctx, key); err == nil || errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Get(%q) error = %v, want a validation error", key, err)
			}
			if _, err := b.Stat(ctx, key); err == nil || errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Stat(%q) error = %v, want a validation error", key, err)
			}
			if err := b.Delete(ctx, key); err == nil {
				t.Errorf("Delete(%q) succeeded, want error", key)
			}
			if _, err := b.SignedURL(ctx, key, http.MethodGet, time.Minute); err == nil {
				t.Errorf("SignedURL(%q) succeeded, want error", key)
			}
		}
	})

	t.Run("FailedPutLeavesNoObject", func(t *testing.T) {
		b := newBucket(t)
		ctx := t.Context()
		err := b.Put(ctx, "half", &failingReader{data: bytes.Repeat([]byte("x"), 4096)}, "")
		if err == nil {
			t.Fatal("Put with a failing reader succeeded")
		}
		if _, err := b.Stat(ctx, "half"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat after failed Put error = %v, want ErrNotFound", err)
		}
	})

	t.Run("FailedPutKeepsPreviousObject", func(t *testing.T) {
		b := newBucket(t)
		ctx := t.Context()
		mustPut(t, b, "stable", []byte("old"), "text/plain")
		if err := b.Put(ctx, "stable", &failingReader{data: []byte("new new new")}, "text/plain"); err == nil {
			t.Fatal("Put with a failing reader succeeded")
		}
		if got := mustGet(t, b, "stable"); string(got) != "old" {
			t.Errorf("after failed overwrite Get = %q, want the old contents", got)
		}
	})

	t.Run("CancelledPutLeavesNoObject", func(t *testing.T) {
		b := newBucket(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := b.Put(ctx, "cancelled", strings.NewReader("data"), ""); err == nil {
			t.Fatal("Put with a cancelled context succeeded")
		}
		if _, err := b.Stat(t.Context(), "cancelled"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat after cancelled Put error = %v, want ErrNotFound", err)
		}
	})

	t.Run("SignedURLRejectsBadArguments", func(t *testing.T) {
		b := newBucket(t)
		ctx := t.Context()
		bad := []struct {
			name    string
			method  string
			expires time.Duration
		}{
			{"DELETE is not signable", http.MethodDelete, time.Minute},
			{"zero expiry", http.MethodGet, 0},
			{"negative expiry", http.MethodPut, -time.Second},
			{"longer than seven days", http.MethodGet, 7*24*time.Hour + time.Second},
		}
		for _, c := range bad {
			if _, err := b.SignedURL(ctx, "some/key", c.method, c.expires); err == nil {
				t.Errorf("%s: SignedURL succeeded, want error", c.name)
			}
		}
	})
}

// invalidKeys must be refused by every backend, mostly so that a key can
// never name a file outside a local bucket's root.
var invalidKeys = []string{
	"",
	"/etc/passwd",
	"../escape",
	"a/../../escape",
	"a/./b",
	".",
	"..",
	"a//b",
	"trailing/",
	`back\slash`,
	".meta/x",     // the local backend's metadata dir
	"a/.tmp-1234", // the local backend's in-flight uploads
	".hidden",
	"nul\x00byte",
	"new\nline",
	"bad\xffutf8",
	strings.Repeat("k", blob.MaxKeyLength+1),
}

func TestValidateKey(t *testing.T) {
	valid := []string{
		"a",
		"builds/0b7c/source.tar.gz",
		"with space/and-ünïcode/文件.txt",
		"dots.in.the.middle/v1..2",
		strings.Repeat("k", blob.MaxKeyLength),
	}
	for _, key := range valid {
		if err := blob.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", key, err)
		}
	}
	for _, key := range invalidKeys {
		if err := blob.ValidateKey(key); err == nil {
			t.Errorf("ValidateKey(%q) = nil, want error", key)
		}
	}
}

func mustPut(t *testing.T, b blob.Bucket, key string, data []byte, contentType string) {
	t.Helper()
	if err := b.Put(t.Context(), key, bytes.NewReader(data), contentType); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func mustGet(t *testing.T, b blob.Bucket, key string) []byte {
	t.Helper()
	rc, err := b.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading %q: %v", key, err)
	}
	return data
}

func keysOf(attrs []blob.Attrs) []string {
	var keys []string
	for _, a := range attrs {
		keys = append(keys, a.Key)
	}
	return keys
}

// failingReader yields data and then fails, like a client connection
// dropping mid-upload.
type failingReader struct {
	data []byte
	done bool
}

var errReaderBroke = errors.New("reader broke mid-stream")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.done {
		return 0, errReaderBroke
	}
	r.done = true
	return copy(p, r.data), nil
}
