package blob_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/proctorhq/proctor/internal/blob"
)

const (
	fakeBucketName = "proctor-test"
	gcsPrefix      = "installs/dev"
)

// newGCS returns a GCSBucket talking to a fresh fake GCS server.
func newGCS(t *testing.T) (*blob.GCSBucket, *fakeGCS) {
	t.Helper()
	fake := newFakeGCS(t, fakeBucketName)
	b, err := blob.NewGCSBucket(t.Context(), fakeBucketName, gcsPrefix, blob.Options{
		GCSClientOptions: fake.clientOptions(),
	})
	if err != nil {
		t.Fatalf("NewGCSBucket: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, fake
}

func TestGCSBucketContract(t *testing.T) {
	testContract(t, func(t *testing.T) blob.Bucket {
		b, _ := newGCS(t)
		return b
	})
}

func TestGCSKeysLiveUnderThePrefix(t *testing.T) {
	b, fake := newGCS(t)
	fake.seed("unrelated/object", "text/plain", "not ours")
	fake.seed("installs/devel/lookalike", "text/plain", "not ours either")
	for _, k := range []string{"a", "b/c", "b/d", "e"} {
		mustPut(t, b, k, []byte(k), "text/plain")
	}

	if got, want := fake.names(), []string{
		"installs/dev/a", "installs/dev/b/c", "installs/dev/b/d", "installs/dev/e",
		"installs/devel/lookalike", "unrelated/object",
	}; !slices.Equal(got, want) {
		t.Errorf("objects in bucket = %q, want %q", got, want)
	}

	listed, err := b.List(t.Context(), "")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if keys, want := keysOf(listed), []string{"a", "b/c", "b/d", "e"}; !slices.Equal(keys, want) {
		t.Errorf("List(\"\") = %q, want %q (prefix stripped, nothing outside it)", keys, want)
	}
	// The fake serves two objects per page, so this took several pages.
	if pages := fake.listCalls(); pages < 2 {
		t.Errorf("List made %d list calls, want it to follow nextPageToken", pages)
	}
}

func TestGCSUploadsSmallObjectsInOneRequestAndLargeOnesResumably(t *testing.T) {
	b, fake := newGCS(t)
	small := []byte("tiny")
	// Larger than the client's default 16 MiB chunk, so it is sent as a
	// resumable upload in two chunks.
	large := bytes.Repeat([]byte("0123456789abcdef"), (17<<20)/16)

	mustPut(t, b, "small", small, "text/plain")
	mustPut(t, b, "large", large, "application/octet-stream")

	if got := fake.uploadTypes(); !slices.Equal(got, []string{"multipart", "resumable"}) {
		t.Errorf("upload types = %q, want multipart then resumable", got)
	}
	if got := mustGet(t, b, "large"); !bytes.Equal(got, large) {
		t.Errorf("large object: got %d bytes back, want the %d uploaded", len(got), len(large))
	}
}

func TestGCSSignedURLWithoutCredentialsFails(t *testing.T) {
	b, _ := newGCS(t)
	_, err := b.SignedURL(t.Context(), "k", http.MethodGet, time.Minute)
	if err == nil {
		t.Fatal("SignedURL without any credentials succeeded")
	}
	t.Logf("SignedURL error: %v", err)
	if !strings.Contains(err.Error(), "credentials") {
		t.Errorf("error = %v, want it to say credentials are missing", err)
	}
}

func TestGCSSignedURLWithServiceAccountKey(t *testing.T) {
	fake := newFakeGCS(t, fakeBucketName)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := blob.NewGCSBucket(t.Context(), fakeBucketName, gcsPrefix, blob.Options{
		GCSClientOptions:  fake.clientOptions(),
		GCSGoogleAccessID: "proctor@example-project.iam.gserviceaccount.com",
		GCSPrivateKey:     pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
	})
	if err != nil {
		t.Fatalf("NewGCSBucket: %v", err)
	}
	defer b.Close()

	raw, err := b.SignedURL(t.Context(), "runs/r1/trace.json", http.MethodPut, 15*time.Minute)
	if err != nil {
		t.Fatalf("SignedURL: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parsing %q: %v", raw, err)
	}
	if want := "/" + fakeBucketName + "/" + gcsPrefix + "/runs/r1/trace.json"; u.Path != want {
		t.Errorf("path = %q, want %q", u.Path, want)
	}
	// The web app's Content-Security-Policy admits images from where signed URLs point.
	if origin := u.Scheme + "://" + u.Host; blob.SignedURLOrigin(b) != origin {
		t.Errorf("SignedURLOrigin = %q, want the signed URL's origin %q", blob.SignedURLOrigin(b), origin)
	}
	q := u.Query()
	// The library counts whole seconds from its own clock reading, so a
	// 15 minute expiry may come out as 899.
	expiresIn, _ := strconv.Atoi(q.Get("X-Goog-Expires"))
	if q.Get("X-Goog-Algorithm") != "GOOG4-RSA-SHA256" || expiresIn < 890 || expiresIn > 900 ||
		!strings.HasPrefix(q.Get("X-Goog-Credential"), "proctor@example-project.iam.gserviceaccount.com/") ||
		q.Get("X-Goog-Signature") == "" {
		t.Errorf("query = %v, want a V4 signature by the service account expiring in about 900s", q)
	}
	// A PUT URL only creates (if-generation-match 0), and the precondition is among the
	// signed query parameters, so a client cannot drop it.
	if q.Get("x-goog-if-generation-match") != "0" {
		t.Errorf("PUT URL query = %v, want x-goog-if-generation-match=0", q)
	}
	get, err := b.SignedURL(t.Context(), "runs/r1/trace.json", http.MethodGet, 15*time.Minute)
	if err != nil {
		t.Fatalf("SignedURL(GET): %v", err)
	}
	if gu, _ := url.Parse(get); gu.Query().Has("x-goog-if-generation-match") {
		t.Errorf("GET URL %s carries the create-only precondition", get)
	}
}

// The client library reads STORAGE_EMULATOR_HOST itself; Open must not get
// in its way.
func TestGCSHonoursStorageEmulatorHost(t *testing.T) {
	fake := newFakeGCS(t, fakeBucketName)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(fake.srv.URL, "http://"))

	b, err := blob.Open(t.Context(), "gs://"+fakeBucketName+"/via-env", blob.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer b.Close()
	if _, ok := b.(*blob.GCSBucket); !ok {
		t.Fatalf("Open(gs://) = %T, want *blob.GCSBucket", b)
	}
	mustPut(t, b, "k", []byte("through the emulator"), "text/plain")
	if got := mustGet(t, b, "k"); string(got) != "through the emulator" {
		t.Errorf("Get = %q", got)
	}
	if names := fake.names(); !slices.Equal(names, []string{"via-env/k"}) {
		t.Errorf("emulator holds %q, want [via-env/k]", names)
	}
}

// fakeGCS implements the slice of the GCS JSON and XML APIs that the Go
// client uses for our operations: multipart and resumable uploads, object
// metadata, delete, paginated list, and XML-API downloads (the client reads
// objects through the XML API, on the same host as the configured endpoint).
type fakeGCS struct {
	t        *testing.T
	bucket   string
	pageSize int
	srv      *httptest.Server

	mu        sync.Mutex
	objects   map[string]fakeObject
	uploads   map[string]*fakeUpload
	nextID    int64
	completed []string // uploadType of each finished upload
	lists     int
}

type fakeObject struct {
	data        []byte
	contentType string
	updated     time.Time
	generation  int64
}

type fakeUpload struct {
	name        string
	contentType string
	data        []byte
}

func newFakeGCS(t *testing.T, bucket string) *fakeGCS {
	f := &fakeGCS{
		t:        t,
		bucket:   bucket,
		pageSize: 2,
		objects:  map[string]fakeObject{},
		uploads:  map[string]*fakeUpload{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /upload/storage/v1/b/{bucket}/o", f.handleUpload)
	mux.HandleFunc("PUT /upload/storage/v1/b/{bucket}/o", f.handleUpload)
	mux.HandleFunc("GET /storage/v1/b/{bucket}/o", f.handleList)
	mux.HandleFunc("GET /storage/v1/b/{bucket}/o/{object}", f.handleMetadata)
	mux.HandleFunc("DELETE /storage/v1/b/{bucket}/o/{object}", f.handleDelete)
	mux.HandleFunc("POST /storage/v1/b/{bucket}/o/{object}/compose", f.handleCompose)
	// XML API download; the client escapes "/" in object names as %2F, so
	// the name arrives as one path segment.
	mux.HandleFunc("GET /{bucket}/{object}", f.handleDownload)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("fake GCS: unexpected request %s %s", r.Method, r.URL)
		gcsError(w, http.StatusNotImplemented, "not implemented by fake")
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGCS) clientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(f.srv.URL + "/storage/v1/"),
		option.WithoutAuthentication(),
	}
}

func (f *fakeGCS) seed(name, contentType, data string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.store(name, contentType, []byte(data))
}

func (f *fakeGCS) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.objects))
	for n := range f.objects {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (f *fakeGCS) uploadTypes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.completed)
}

func (f *fakeGCS) listCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// store must be called with f.mu held.
func (f *fakeGCS) store(name, contentType string, data []byte) fakeObject {
	f.nextID++
	o := fakeObject{data: data, contentType: contentType, updated: time.Now().UTC(), generation: f.nextID}
	f.objects[name] = o
	return o
}

func (f *fakeGCS) checkBucket(w http.ResponseWriter, r *http.Request) bool {
	if r.PathValue("bucket") != f.bucket {
		gcsError(w, http.StatusNotFound, "no such bucket")
		return false
	}
	return true
}

func (f *fakeGCS) handleUpload(w http.ResponseWriter, r *http.Request) {
	if !f.checkBucket(w, r) {
		return
	}
	q := r.URL.Query()
	if id := q.Get("upload_id"); id != "" {
		f.handleChunk(w, r, id)
		return
	}
	switch q.Get("uploadType") {
	case "multipart":
		f.handleMultipart(w, r)
	case "resumable":
		var meta struct{ Name, ContentType string }
		if err := json.NewDecoder(r.Body).Decode(&meta); err != nil {
			gcsError(w, http.StatusBadRequest, "bad metadata: "+err.Error())
			return
		}
		if meta.Name == "" {
			meta.Name = q.Get("name")
		}
		if meta.ContentType == "" {
			meta.ContentType = r.Header.Get("X-Upload-Content-Type")
		}
		f.mu.Lock()
		f.nextID++
		id := strconv.FormatInt(f.nextID, 10)
		f.uploads[id] = &fakeUpload{name: meta.Name, contentType: meta.ContentType}
		f.mu.Unlock()
		w.Header().Set("Location", fmt.Sprintf("%s/upload/storage/v1/b/%s/o?uploadType=resumable&upload_id=%s", f.srv.URL, f.bucket, id))
		w.WriteHeader(http.StatusOK)
	default:
		gcsError(w, http.StatusBadRequest, "unsupported uploadType "+q.Get("uploadType"))
	}
}

func (f *fakeGCS) handleMultipart(w http.ResponseWriter, r *http.Request) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		gcsError(w, http.StatusBadRequest, "bad content type: "+err.Error())
		return
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	metaPart, err := mr.NextPart()
	if err != nil {
		gcsError(w, http.StatusBadRequest, "missing metadata part")
		return
	}
	var meta struct{ Name, ContentType string }
	if err := json.NewDecoder(metaPart).Decode(&meta); err != nil {
		gcsError(w, http.StatusBadRequest, "bad metadata: "+err.Error())
		return
	}
	mediaPart, err := mr.NextPart()
	if err != nil {
		gcsError(w, http.StatusBadRequest, "missing media part")
		return
	}
	data, err := io.ReadAll(mediaPart)
	if err != nil {
		// The client gave up mid-upload; like GCS, store nothing.
		return
	}
	if meta.ContentType == "" {
		meta.ContentType = mediaPart.Header.Get("Content-Type")
	}
	f.mu.Lock()
	o := f.store(meta.Name, meta.ContentType, data)
	f.completed = append(f.completed, "multipart")
	f.mu.Unlock()
	writeJSON(w, f.resource(meta.Name, o))
}

func (f *fakeGCS) handleChunk(w http.ResponseWriter, r *http.Request, id string) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	// Content-Range: "bytes A-B/*" (more to come), "bytes A-B/N" or
	// "bytes */N" (final).
	cr := strings.TrimPrefix(r.Header.Get("Content-Range"), "bytes ")
	rng, total, ok := strings.Cut(cr, "/")
	if !ok {
		gcsError(w, http.StatusBadRequest, "bad Content-Range "+cr)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	up, ok := f.uploads[id]
	if !ok {
		gcsError(w, http.StatusNotFound, "no such upload")
		return
	}
	if rng != "*" {
		start, _, _ := strings.Cut(rng, "-")
		if off, err := strconv.Atoi(start); err != nil || off != len(up.data) {
			gcsError(w, http.StatusBadRequest, "chunk at "+start+", want "+strconv.Itoa(len(up.data)))
			return
		}
		up.data = append(up.data, data...)
	}
	if total == "*" {
		w.Header().Set("X-Http-Status-Code-Override", "308")
		w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", len(up.data)-1))
		w.WriteHeader(http.StatusOK)
		return
	}
	if n, err := strconv.Atoi(total); err != nil || n != len(up.data) {
		gcsError(w, http.StatusBadRequest, "final size mismatch")
		return
	}
	delete(f.uploads, id)
	o := f.store(up.name, up.contentType, up.data)
	f.completed = append(f.completed, "resumable")
	writeJSON(w, f.resource(up.name, o))
}

func (f *fakeGCS) handleMetadata(w http.ResponseWriter, r *http.Request) {
	if !f.checkBucket(w, r) {
		return
	}
	name := r.PathValue("object")
	f.mu.Lock()
	o, ok := f.objects[name]
	f.mu.Unlock()
	if !ok {
		gcsError(w, http.StatusNotFound, "No such object: "+f.bucket+"/"+name)
		return
	}
	writeJSON(w, f.resource(name, o))
}

// handleCompose joins source objects as GCS does: at most 32, all present.
func (f *fakeGCS) handleCompose(w http.ResponseWriter, r *http.Request) {
	if !f.checkBucket(w, r) {
		return
	}
	var req struct {
		SourceObjects []struct {
			Name string `json:"name"`
		} `json:"sourceObjects"`
		Destination struct {
			ContentType string `json:"contentType"`
		} `json:"destination"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.SourceObjects) == 0 || len(req.SourceObjects) > 32 {
		gcsError(w, http.StatusBadRequest, "a compose request joins 1 to 32 objects")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var data []byte
	for _, src := range req.SourceObjects {
		o, ok := f.objects[src.Name]
		if !ok {
			gcsError(w, http.StatusNotFound, "No such object: "+f.bucket+"/"+src.Name)
			return
		}
		data = append(data, o.data...)
	}
	name := r.PathValue("object")
	writeJSON(w, f.resource(name, f.store(name, req.Destination.ContentType, data)))
}

func (f *fakeGCS) handleDelete(w http.ResponseWriter, r *http.Request) {
	if !f.checkBucket(w, r) {
		return
	}
	name := r.PathValue("object")
	f.mu.Lock()
	_, ok := f.objects[name]
	delete(f.objects, name)
	f.mu.Unlock()
	if !ok {
		gcsError(w, http.StatusNotFound, "No such object: "+f.bucket+"/"+name)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeGCS) handleList(w http.ResponseWriter, r *http.Request) {
	if !f.checkBucket(w, r) {
		return
	}
	q := r.URL.Query()
	prefix, token := q.Get("prefix"), q.Get("pageToken")
	size := f.pageSize
	if m, err := strconv.Atoi(q.Get("maxResults")); err == nil && m > 0 && m < size {
		size = m
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var names []string
	for n := range f.objects {
		if strings.HasPrefix(n, prefix) && n > token {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	resp := map[string]any{"kind": "storage#objects"}
	if len(names) > size {
		names = names[:size]
		resp["nextPageToken"] = names[size-1]
	}
	items := []any{}
	for _, n := range names {
		items = append(items, f.resource(n, f.objects[n]))
	}
	resp["items"] = items
	writeJSON(w, resp)
}

func (f *fakeGCS) handleDownload(w http.ResponseWriter, r *http.Request) {
	if !f.checkBucket(w, r) {
		return
	}
	name := r.PathValue("object")
	f.mu.Lock()
	o, ok := f.objects[name]
	f.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", o.contentType)
	h.Set("Content-Length", strconv.Itoa(len(o.data)))
	h.Set("Last-Modified", o.updated.Format(http.TimeFormat))
	h.Set("X-Goog-Generation", strconv.FormatInt(o.generation, 10))
	h.Set("X-Goog-Metageneration", "1")
	h.Set("X-Goog-Hash", "crc32c="+crc32c(o.data))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(o.data)
	}
}

func (f *fakeGCS) resource(name string, o fakeObject) map[string]any {
	return map[string]any{
		"kind":           "storage#object",
		"bucket":         f.bucket,
		"name":           name,
		"size":           strconv.Itoa(len(o.data)),
		"contentType":    o.contentType,
		"updated":        o.updated.Format(time.RFC3339Nano),
		"timeCreated":    o.updated.Format(time.RFC3339Nano),
		"generation":     strconv.FormatInt(o.generation, 10),
		"metageneration": "1",
		"crc32c":         crc32c(o.data),
	}
}

func crc32c(data []byte) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	return base64.StdEncoding.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func gcsError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"code": code, "message": msg},
	})
}
