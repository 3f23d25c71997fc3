package blob_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/blob"
)

var testSigningKey = []byte("test-signing-key-not-secret")

func newLocal(t *testing.T, dir string, opts blob.Options) *blob.LocalBucket {
	t.Helper()
	b, err := blob.NewLocalBucket(dir, opts)
	if err != nil {
		t.Fatalf("NewLocalBucket: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestLocalBucketContract(t *testing.T) {
	testContract(t, func(t *testing.T) blob.Bucket {
		return newLocal(t, t.TempDir(), blob.Options{
			PublicBaseURL: "http://127.0.0.1:1",
			SigningKey:    testSigningKey,
		})
	})
}

func TestOpenDispatchesOnScheme(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()

	b, err := blob.Open(ctx, "file://"+dir+"/blobs", blob.Options{})
	if err != nil {
		t.Fatalf("Open(file://): %v", err)
	}
	defer b.Close()
	if _, ok := b.(*blob.LocalBucket); !ok {
		t.Errorf("Open(file://) = %T, want *blob.LocalBucket", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "blobs")); err != nil {
		t.Errorf("Open(file://) did not create the directory: %v", err)
	}

	bad := map[string]string{
		"unknown scheme":    "s3://bucket/prefix",
		"no scheme":         "/var/lib/blobs",
		"relative file URL": "file:relative/dir",
		"file URL host":     "file://otherhost/dir",
		"gs without bucket": "gs:///prefix",
		"gs invalid prefix": "gs://bucket/../up",
	}
	for name, raw := range bad {
		if b, err := blob.Open(ctx, raw, blob.Options{}); err == nil {
			_ = b.Close()
			t.Errorf("%s: Open(%q) succeeded, want error", name, raw)
		}
	}
}

func TestLocalObjectsArePlainFilesUnderTheRoot(t *testing.T) {
	dir := t.TempDir()
	b := newLocal(t, dir, blob.Options{})
	mustPut(t, b, "builds/b1/source.tar.gz", []byte("tarball"), "application/gzip")

	got, err := os.ReadFile(filepath.Join(dir, "builds", "b1", "source.tar.gz"))
	if err != nil || string(got) != "tarball" {
		t.Errorf("file on disk = %q, %v; want the object's bytes", got, err)
	}
}

func TestLocalFailedPutLeavesNoTempFiles(t *testing.T) {
	dir := t.TempDir()
	b := newLocal(t, dir, blob.Options{})
	ctx := t.Context()

	if err := b.Put(ctx, "runs/r1/out.bin", &failingReader{data: []byte("partial")}, ""); !errors.Is(err, errReaderBroke) {
		t.Fatalf("Put error = %v, want it to wrap the reader's error", err)
	}
	mustPut(t, b, "runs/r1/ok.bin", []byte("fine"), "")
	if err := b.Put(ctx, "runs/r1/ok.bin", &failingReader{data: []byte("partial")}, ""); err == nil {
		t.Fatal("overwrite with failing reader succeeded")
	}

	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".meta/runs/r1/ok.bin.json", "runs/r1/ok.bin"}
	if strings.Join(files, ",") != strings.Join(want, ",") {
		t.Errorf("files on disk = %q, want only %q (no temp files, no partial object)", files, want)
	}
}

func TestLocalKeysNeverEscapeTheRoot(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	outside := filepath.Join(parent, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	b := newLocal(t, root, blob.Options{})
	ctx := t.Context()

	for _, key := range invalidKeys {
		_ = b.Put(ctx, key, strings.NewReader("pwned"), "")
	}
	// A symlink planted inside the root must not be followed out of it
	// either, even though "link/x" is a perfectly valid key.
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "link/x", strings.NewReader("pwned"), ""); err == nil {
		t.Errorf("Put through a symlink leaving the root succeeded")
	}

	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("files written outside the root: %v", entries)
	}
	entries, err = os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("parent dir has %d entries, want only root/ and outside/: %v", len(entries), entries)
	}
}

// signedServer serves a local bucket the way the API server does: mounted
// at /blob/ on the public base URL.
func signedServer(t *testing.T, opts blob.Options) (*blob.LocalBucket, *httptest.Server) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	opts.PublicBaseURL = srv.URL
	opts.SigningKey = testSigningKey
	b := newLocal(t, t.TempDir(), opts)
	mux.Handle("/blob/", b.Handler())
	return b, srv
}

func TestLocalSignedURLs(t *testing.T) {
	b, srv := signedServer(t, blob.Options{MaxUploadBytes: 1024})
	ctx := t.Context()

	t.Run("URLShape", func(t *testing.T) {
		u, err := b.SignedURL(ctx, "runs/r 1/trace.json", http.MethodGet, time.Hour)
		if err != nil {
			t.Fatalf("SignedURL: %v", err)
		}
		if want := srv.URL + "/blob/runs/r%201/trace.json?"; !strings.HasPrefix(u, want) {
			t.Errorf("URL = %s, want prefix %s", u, want)
		}
		q := mustParseQuery(t, u)
		exp, _ := strconv.ParseInt(q.Get("expires"), 10, 64)
		if q.Get("method") != "GET" || q.Get("sig") == "" || time.Until(time.Unix(exp, 0)) > time.Hour {
			t.Errorf("URL query = %v, want method=GET, a sig and expiry within the hour", q)
		}
	})

	t.Run("GETServesTheObject", func(t *testing.T) {
		mustPut(t, b, "attachments/a1/report.html", []byte("<h1>hi</h1>"), "text/html")
		u := mustSign(t, b, "attachments/a1/report.html", http.MethodGet)

		resp := do(t, http.MethodGet, u, nil, "")
		if resp.status != http.StatusOK || resp.body != "<h1>hi</h1>" {
			t.Fatalf("GET = %d %q, want 200 with the object", resp.status, resp.body)
		}
		if ct := resp.header.Get("Content-Type"); ct != "text/html" {
			t.Errorf("Content-Type = %q, want the stored text/html", ct)
		}
		// Uploaded HTML is served from the API's origin; it must not run.
		if resp.header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(resp.header.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("missing nosniff/sandbox headers: %v", resp.header)
		}
	})

	t.Run("PUTStoresTheBody", func(t *testing.T) {
		u := mustSign(t, b, "workspaces/w1.tar", http.MethodPut)
		resp := do(t, http.MethodPut, u, strings.NewReader("archive bytes"), "application/x-tar")
		if resp.status != http.StatusOK {
			t.Fatalf("PUT = %d %s, want 200", resp.status, resp.body)
		}
		if got := mustGet(t, b, "workspaces/w1.tar"); string(got) != "archive bytes" {
			t.Errorf("stored %q, want the PUT body", got)
		}
		attrs, err := b.Stat(ctx, "workspaces/w1.tar")
		if err != nil || attrs.ContentType != "application/x-tar" {
			t.Errorf("Stat = %+v, %v; want the PUT's content type", attrs, err)
		}
	})

	t.Run("PUTWritesOnce", func(t *testing.T) {
		u := mustSign(t, b, "once/data.csv", http.MethodPut)
		if resp := do(t, http.MethodPut, u, strings.NewReader("a,b\n1,2\n"), "text/csv"); resp.status != http.StatusOK {
			t.Fatalf("first PUT = %d %s, want 200", resp.status, resp.body)
		}
		wantError(t, do(t, http.MethodPut, u, strings.NewReader("<html>8 MiB of it</html>"), "text/html"),
			http.StatusPreconditionFailed, "precondition_failed")
		attrs, err := b.Stat(ctx, "once/data.csv")
		if got := mustGet(t, b, "once/data.csv"); string(got) != "a,b\n1,2\n" || err != nil || attrs.ContentType != "text/csv" {
			t.Errorf("after a second PUT: %q, %+v, %v; want the first PUT's bytes and type", got, attrs, err)
		}
	})

	t.Run("ConcurrentPUTsStoreOneBodyWhole", func(t *testing.T) {
		u := mustSign(t, b, "once/raced", http.MethodPut)
		bodies := []string{strings.Repeat("a", 512), strings.Repeat("b", 512), strings.Repeat("c", 512), strings.Repeat("d", 512)}
		statuses := make(chan int, len(bodies))
		for _, body := range bodies {
			go func() {
				// Not do: it may call t.Fatalf, which only the test's goroutine may.
				req, _ := http.NewRequestWithContext(ctx, http.MethodPut, u, strings.NewReader(body))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					statuses <- 0
					return
				}
				resp.Body.Close()
				statuses <- resp.StatusCode
			}()
		}
		ok := 0
		for range bodies {
			switch st := <-statuses; st {
			case http.StatusOK:
				ok++
			case http.StatusPreconditionFailed:
			default:
				t.Errorf("a racing PUT = %d, want 200 or 412", st)
			}
		}
		got := string(mustGet(t, b, "once/raced"))
		if ok != 1 || !slices.Contains(bodies, got) {
			t.Errorf("%d PUTs succeeded and stored %.10q…, want exactly one whole body", ok, got)
		}
	})

	t.Run("PUTAfterRetireIsRefused", func(t *testing.T) {
		u := mustSign(t, b, "once/deleted", http.MethodPut)
		if resp := do(t, http.MethodPut, u, strings.NewReader("first"), ""); resp.status != http.StatusOK {
			t.Fatalf("first PUT = %d, want 200", resp.status)
		}
		if err := blob.Retire(ctx, b, "once/deleted"); err != nil {
			t.Fatalf("Retire: %v", err)
		}
		wantError(t, do(t, http.MethodPut, u, strings.NewReader("back again"), ""), http.StatusPreconditionFailed, "precondition_failed")
		attrs, err := b.Stat(ctx, "once/deleted")
		if err != nil || attrs.Size != 0 || attrs.ContentType != blob.RetiredContentType {
			t.Errorf("after a PUT to a retired key: %+v, %v; want the empty placeholder", attrs, err)
		}
		// A signed GET of a retired key finds nothing: its bytes were deleted.
		wantError(t, do(t, http.MethodGet, mustSign(t, b, "once/deleted", http.MethodGet), nil, ""), http.StatusNotFound, "not_found")
	})

	t.Run("GETOfMissingObjectIs404", func(t *testing.T) {
		resp := do(t, http.MethodGet, mustSign(t, b, "not/there", http.MethodGet), nil, "")
		wantError(t, resp, http.StatusNotFound, "not_found")
	})

	t.Run("TamperedURLsAreForbidden", func(t *testing.T) {
		mustPut(t, b, "secret/one", []byte("1"), "")
		mustPut(t, b, "secret/two", []byte("2"), "")
		good := mustSign(t, b, "secret/one", http.MethodGet)

		flipSig := replaceParam(t, good, "sig", func(s string) string {
			last := "0"
			if strings.HasSuffix(s, "0") {
				last = "1"
			}
			return s[:len(s)-1] + last
		})
		otherKey := strings.Replace(good, "secret/one", "secret/two", 1)
		longer := replaceParam(t, good, "expires", func(s string) string {
			n, _ := strconv.ParseInt(s, 10, 64)
			return strconv.FormatInt(n+3600, 10)
		})
		noSig := replaceParam(t, good, "sig", func(string) string { return "" })

		for name, u := range map[string]string{
			"flipped signature":  flipSig,
			"different key":      otherKey,
			"extended expiry":    longer,
			"missing signature":  noSig,
			"no query at all":    srv.URL + "/blob/secret/one",
			"signed for nothing": replaceParam(t, good, "method", func(string) string { return "" }),
		} {
			resp := do(t, http.MethodGet, u, nil, "")
			if resp.status != http.StatusForbidden {
				t.Errorf("%s: GET = %d, want 403", name, resp.status)
				continue
			}
			wantError(t, resp, http.StatusForbidden, "forbidden")
		}
	})

	t.Run("ExpiredURLsAreForbidden", func(t *testing.T) {
		mustPut(t, b, "old/news", []byte("x"), "")
		// Signed exactly as SignedURL would, but with a past expiry.
		exp := time.Now().Add(-time.Second).Unix()
		u := srv.URL + "/blob/old/news?" + url.Values{
			"method":  {"GET"},
			"expires": {strconv.FormatInt(exp, 10)},
			"sig":     {hmacHex(testSigningKey, "GET\nold/news\n"+strconv.FormatInt(exp, 10))},
		}.Encode()

		resp := do(t, http.MethodGet, u, nil, "")
		wantError(t, resp, http.StatusForbidden, "forbidden")
		if !strings.Contains(resp.body, "expired") {
			t.Errorf("body = %s, want it to say the URL expired", resp.body)
		}

		// The same construction with a future expiry is accepted, which
		// pins down the documented signature format.
		exp = time.Now().Add(time.Minute).Unix()
		u = srv.URL + "/blob/old/news?" + url.Values{
			"method":  {"GET"},
			"expires": {strconv.FormatInt(exp, 10)},
			"sig":     {hmacHex(testSigningKey, "GET\nold/news\n"+strconv.FormatInt(exp, 10))},
		}.Encode()
		if resp := do(t, http.MethodGet, u, nil, ""); resp.status != http.StatusOK {
			t.Errorf("hand-signed valid URL: GET = %d %s, want 200", resp.status, resp.body)
		}
	})

	t.Run("WrongMethodIsForbidden", func(t *testing.T) {
		mustPut(t, b, "ro/object", []byte("original"), "")
		getURL := mustSign(t, b, "ro/object", http.MethodGet)
		resp := do(t, http.MethodPut, getURL, strings.NewReader("overwritten"), "")
		wantError(t, resp, http.StatusForbidden, "forbidden")
		if got := mustGet(t, b, "ro/object"); string(got) != "original" {
			t.Errorf("object = %q after forbidden PUT, want unchanged", got)
		}

		putURL := mustSign(t, b, "ro/object", http.MethodPut)
		wantError(t, do(t, http.MethodGet, putURL, nil, ""), http.StatusForbidden, "forbidden")

		resp = do(t, http.MethodDelete, getURL, nil, "")
		if resp.status != http.StatusMethodNotAllowed {
			t.Errorf("DELETE = %d, want 405", resp.status)
		}
	})

	t.Run("OversizedPUTIsRejectedAndNotStored", func(t *testing.T) {
		big := bytes.Repeat([]byte("x"), 1025)
		u := mustSign(t, b, "too/big", http.MethodPut)
		wantError(t, do(t, http.MethodPut, u, bytes.NewReader(big), ""), http.StatusRequestEntityTooLarge, "payload_too_large")

		// Without a Content-Length the limit is enforced while streaming.
		chunked := io.MultiReader(bytes.NewReader(big))
		wantError(t, do(t, http.MethodPut, u, chunked, ""), http.StatusRequestEntityTooLarge, "payload_too_large")

		if _, err := b.Stat(ctx, "too/big"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat after rejected upload error = %v, want ErrNotFound", err)
		}
	})
}

func TestLocalSignedURLNeedsBaseURLAndKey(t *testing.T) {
	b := newLocal(t, t.TempDir(), blob.Options{})
	if _, err := b.SignedURL(t.Context(), "k", http.MethodGet, time.Minute); err == nil {
		t.Error("SignedURL without PublicBaseURL and SigningKey succeeded")
	}
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, u string, body io.Reader, contentType string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(data)}
}

func wantError(t *testing.T, resp response, status int, code string) {
	t.Helper()
	if resp.status != status {
		t.Errorf("status = %d (%s), want %d", resp.status, resp.body, status)
		return
	}
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(resp.body), &env); err != nil {
		t.Errorf("error body %q is not the JSON envelope: %v", resp.body, err)
		return
	}
	if env.Error.Code != code || env.Error.Message == "" {
		t.Errorf("error = %+v, want code %q and a message", env.Error, code)
	}
}

func mustSign(t *testing.T, b blob.Bucket, key, method string) string {
	t.Helper()
	u, err := b.SignedURL(t.Context(), key, method, time.Minute)
	if err != nil {
		t.Fatalf("SignedURL(%q, %s): %v", key, method, err)
	}
	return u
}

func mustParseQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parsing %q: %v", raw, err)
	}
	return u.Query()
}

func replaceParam(t *testing.T, raw, name string, f func(string) string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parsing %q: %v", raw, err)
	}
	q := u.Query()
	q.Set(name, f(q.Get(name)))
	u.RawQuery = q.Encode()
	return u.String()
}

func hmacHex(key []byte, msg string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msg))
	return hex.EncodeToString(mac.Sum(nil))
}
