package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

// UploadLimits bound task attachments.
type UploadLimits struct {
	// MaxBytes is the largest upload (0: 5 GiB).
	MaxBytes int64
	// PartBytes is the size of a multipart upload's parts; an upload no larger is single-part
	// (0: 64 MiB).
	PartBytes int64
	// AllowedTypes are the media types an upload may have: exact ("application/pdf") or a family
	// ("image/*"). Empty allows any.
	AllowedTypes []string
}

func (l UploadLimits) withDefaults() UploadLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 5 << 30
	}
	if l.PartBytes <= 0 {
		l.PartBytes = 64 << 20
	}
	return l
}

// allows says whether a media type is allowed (parameters such as charset are ignored).
func (l UploadLimits) allows(contentType string) bool {
	if len(l.AllowedTypes) == 0 {
		return true
	}
	mt, _, _ := strings.Cut(strings.ToLower(contentType), ";")
	mt = strings.TrimSpace(mt)
	for _, a := range l.AllowedTypes {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == mt || (strings.HasSuffix(a, "/*") && strings.HasPrefix(mt, strings.TrimSuffix(a, "*"))) {
			return true
		}
	}
	return false
}

// registerUploads registers the staging of a file and its deletion.
func (s *Server) registerUploads() {
	tags := []string{"Uploads"}
	registry := s.api.OpenAPI().Components.Schemas
	create := op(huma.Operation{
		OperationID: "create-upload", Method: http.MethodPost, Path: "/uploads", Tags: tags, Summary: "Stage a file for a taskset's task briefs",
		Description: "A JSON body answers presigned PUTs for the bytes: one (`mode` single) when the file fits in one part, else one per " +
			"part (`mode` multipart); then POST /v2/uploads/complete. A multipart/form-data body (the page form: a `file` field, at most " +
			"32 MiB) stores the file at once and answers it staged. The `url` is the file's storage:// locator: a task refers to the file " +
			"by putting it in its content (prompt, arguments…), and its brief then lists it. Size and type are checked against the server's " +
			"limits before any byte is stored.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusServiceUnavailable},
	}, authSession)
	// The body is JSON or a form: the handler reads and validates it (CreateUploadRequest.check),
	// a form as a stream (bodygate.go), its file spilled to a temporary file, not memory.
	create.MaxBodyBytes, create.SkipValidateBody = maxFormUpload+1<<20, true
	create.Metadata[metaStreamBody] = true
	huma.Register(s.v2, create, s.createUpload)
	// Huma reads a body itself, whole, for an operation whose registration declares a schema
	// for it; this one's is documented once it is registered, so that its form streams.
	body := &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
		"application/json": {Schema: registry.Schema(reflect.TypeOf(CreateUploadRequest{}), true, "CreateUploadRequest")},
		"multipart/form-data": {Schema: &huma.Schema{Type: "object", Required: []string{"file"}, Properties: map[string]*huma.Schema{
			"file": {Type: "string", Format: "binary", Description: "the file"},
			"name": {Type: "string", Description: "its name (default: the file's)"},
		}}},
	}}
	s.api.OpenAPI().Paths["/v2/uploads"].Post.RequestBody = body
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "delete-upload", Method: http.MethodDelete, Path: "/uploads", Tags: tags, Summary: "Delete a staged file",
		Description: "Refused with 409 while a task of the taskset refers to the file; `deleted` is false when there was nothing to delete.",
		Errors:      []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict},
	}, authSession), s.deleteUpload)
}

// UploadPart is a presigned PUT for one part.
type UploadPart struct {
	PartNumber int    `json:"part_number"`
	Size       int64  `json:"size" doc:"the bytes this part must have"`
	UploadURL  string `json:"upload_url"`
}

// UploadView is a staged file: the answer of every upload route.
type UploadView struct {
	Mode        string       `json:"mode" enum:"single,multipart"`
	UploadID    uuid.UUID    `json:"upload_id"`
	URL         string       `json:"url" doc:"the storage:// locator task content refers to it by"`
	Name        string       `json:"name"`
	Size        int64        `json:"size"`
	ContentType string       `json:"content_type"`
	Status      string       `json:"status" enum:"pending,staged,failed"`
	Error       string       `json:"error"`
	UploadURL   string       `json:"upload_url,omitempty" doc:"single mode, while pending: PUT the bytes here; it writes once (a second PUT is refused with 412)"`
	PartSize    int64        `json:"part_size,omitempty" doc:"multipart mode: the size of every part but the last"`
	Parts       []UploadPart `json:"parts,omitempty" doc:"multipart mode, while pending: a PUT per part"`
	ExpiresAt   *time.Time   `json:"expires_at,omitempty" doc:"when the upload URLs expire"`
}

func uploadView(u *models.StagedFile) UploadView {
	v := UploadView{Mode: u.Mode, UploadID: u.ID, URL: u.Locator(), Name: u.Name, Size: u.SizeBytes, ContentType: u.ContentType, Status: u.Status, Error: u.Error}
	if u.Mode == catalog.UploadMultipart {
		v.PartSize = u.PartBytes
	}
	return v
}

// presign adds fresh PUT URLs to v: the single object, or the given parts (every part when none).
func (s *Server) presign(ctx context.Context, u *models.StagedFile, v *UploadView, parts []int) error {
	exp := time.Now().Add(uploadURLTTL).UTC()
	v.ExpiresAt = &exp
	if u.Mode == catalog.UploadSingle {
		url, err := s.bucket.SignedURL(ctx, u.ObjectKey, http.MethodPut, uploadURLTTL)
		v.UploadURL = url
		return err
	}
	if len(parts) == 0 {
		for n := 1; n <= u.PartCount; n++ {
			parts = append(parts, n)
		}
	}
	v.Parts = make([]UploadPart, 0, len(parts))
	for _, n := range parts {
		url, err := s.bucket.SignedURL(ctx, u.PartKey(n), http.MethodPut, uploadURLTTL)
		if err != nil {
			return err
		}
		v.Parts = append(v.Parts, UploadPart{PartNumber: n, Size: u.PartSize(n), UploadURL: url})
	}
	return nil
}

// maxFormUpload bounds a file sent in a form (larger ones take the presigned path).
const maxFormUpload = 32 << 20

// CreateUploadRequest stages a file through presigned PUTs.
type CreateUploadRequest struct {
	Name        string `json:"name" minLength:"1" maxLength:"255"`
	Size        int64  `json:"size" minimum:"0"`
	ContentType string `json:"content_type" minLength:"1" maxLength:"255" example:"application/pdf"`
	SHA256      string `json:"sha256,omitempty" pattern:"^[0-9a-fA-F]{64}$" doc:"the hex SHA-256 of the bytes; complete checks it"`
}

var sha256Hex = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// check validates the request as its schema says (the body is read raw: it may be a form).
func (b *CreateUploadRequest) check() error {
	var errs models.ValidationError
	if b.Name == "" || len(b.Name) > 255 || !plainName(b.Name) {
		errs = append(errs, models.FieldError{Location: "name", Message: "a file name of 1 to 255 bytes, with no slash, not . or ..", Value: b.Name})
	}
	if b.Size < 0 {
		errs = append(errs, models.FieldError{Location: "size", Message: "expected number >= 0", Value: b.Size})
	}
	if b.ContentType == "" || len(b.ContentType) > 255 {
		errs = append(errs, models.FieldError{Location: "content_type", Message: "a media type of 1 to 255 bytes", Value: b.ContentType})
	}
	if b.SHA256 != "" && !sha256Hex.MatchString(b.SHA256) {
		errs = append(errs, models.FieldError{Location: "sha256", Message: "64 hex digits", Value: b.SHA256})
	}
	if len(errs) > 0 {
		return storeError(errs, "")
	}
	return nil
}

type createUploadInput struct {
	TasksetID   uuid.UUID `query:"taskset_id" required:"true"`
	ContentType string    `header:"Content-Type"`
	// body is the request's body: read by the handler, not by Huma, so that a form streams.
	body io.Reader
}

// Resolve keeps the body's reader for the handler.
func (in *createUploadInput) Resolve(ctx huma.Context) []error {
	in.body = ctx.BodyReader()
	return nil
}

type stagedOutput struct{ Body UploadView }

// createUpload serves POST /v2/uploads: a JSON body stages through presigned PUTs, a form
// stores the file at once.
func (s *Server) createUpload(ctx context.Context, in *createUploadInput) (*stagedOutput, error) {
	if err := s.requireBucket(); err != nil {
		return nil, err
	}
	mt, params, _ := mime.ParseMediaType(in.ContentType)
	if mt == "multipart/form-data" {
		return s.createFormUpload(ctx, in.TasksetID, in.body, params["boundary"])
	}
	if mt != "" && mt != "application/json" {
		return nil, newAPIError(http.StatusUnsupportedMediaType, "send JSON ({name, size, content_type, sha256}) or a multipart/form-data form with a file field")
	}
	raw, err := readUploadRequest(in.body)
	if err != nil {
		return nil, err
	}
	var b CreateUploadRequest
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, newAPIError(http.StatusBadRequest, "the body is not a JSON object of {name, size, content_type, sha256}: "+bound(err.Error()))
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	lim := s.uploads.withDefaults()
	if err := lim.admit(b.Size, b.ContentType); err != nil {
		return nil, err
	}
	u := &models.StagedFile{TasksetID: in.TasksetID, Name: b.Name, ContentType: b.ContentType, SizeBytes: b.Size, SHA256: strings.ToLower(b.SHA256),
		Mode: catalog.UploadSingle, PartBytes: b.Size, PartCount: 1}
	if b.Size > lim.PartBytes {
		u.Mode, u.PartBytes = catalog.UploadMultipart, lim.PartBytes
		u.PartCount = int((b.Size + lim.PartBytes - 1) / lim.PartBytes)
	}
	if err := s.catalog.CreateUpload(ctx, callerFrom(ctx), u); err != nil {
		return nil, storeError(err, "taskset")
	}
	out := &stagedOutput{Body: uploadView(u)}
	return out, s.presign(ctx, u, &out.Body, nil)
}

// admit checks a file's size and declared type against the limits.
func (l UploadLimits) admit(size int64, contentType string) error {
	if size > l.MaxBytes {
		return newAPIError(http.StatusRequestEntityTooLarge, fmt.Sprintf("the file is %d bytes; an upload may be at most %d", size, l.MaxBytes))
	}
	if !l.allows(contentType) {
		return newAPIError(http.StatusUnsupportedMediaType, fmt.Sprintf("%s files may not be uploaded; allowed: %s", contentType, strings.Join(l.AllowedTypes, ", ")))
	}
	return nil
}

// maxUploadRequest bounds the JSON body of an upload's staging.
const maxUploadRequest = 1 << 20

// readUploadRequest reads the JSON body of create-upload (readBody buffered it already).
func readUploadRequest(body io.Reader) ([]byte, error) {
	if body == nil {
		return nil, newAPIError(http.StatusBadRequest, "send JSON ({name, size, content_type, sha256}) or a multipart/form-data form with a file field")
	}
	raw, err := io.ReadAll(io.LimitReader(body, maxUploadRequest+1))
	switch {
	case err != nil:
		return nil, newAPIError(http.StatusBadRequest, "could not read the request body")
	case len(raw) > maxUploadRequest:
		return nil, newAPIError(http.StatusRequestEntityTooLarge, fmt.Sprintf("a JSON body here is at most %d bytes", maxUploadRequest))
	}
	return raw, nil
}

// formMemory is what a form's parts may hold in memory: a file past it is spilled to a
// temporary file as it is read (mime/multipart), so that an upload costs a buffer, not its size.
const formMemory = 256 << 10

// createFormUpload stores the file of a form (the page form) and answers it staged: its type is
// sniffed from its bytes, refined by its name's extension for generic text or bytes.
func (s *Server) createFormUpload(ctx context.Context, tasksetID uuid.UUID, body io.Reader, boundary string) (*stagedOutput, error) {
	if boundary == "" || body == nil {
		return nil, newAPIError(http.StatusBadRequest, "a multipart/form-data body needs a boundary")
	}
	form, err := multipart.NewReader(body, boundary).ReadForm(formMemory)
	if err != nil {
		return nil, bodyError(err, "the form cannot be read")
	}
	defer form.RemoveAll() //nolint:errcheck // temporary files of the form
	files := form.File["file"]
	if len(files) != 1 {
		return nil, validation("body.file", "send exactly one file in the file field", nil)
	}
	fh := files[0]
	name := fh.Filename
	if v := form.Value["name"]; len(v) > 0 && v[0] != "" {
		name = v[0]
	}
	f, err := fh.Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	kind := sniff(head[:n], name)
	req := CreateUploadRequest{Name: name, Size: fh.Size, ContentType: kind}
	if err := req.check(); err != nil {
		return nil, err
	}
	lim := s.uploads.withDefaults()
	if err := lim.admit(fh.Size, kind); err != nil {
		return nil, err
	}
	u := &models.StagedFile{TasksetID: tasksetID, Name: name, ContentType: kind, SizeBytes: fh.Size, Mode: catalog.UploadSingle, PartBytes: fh.Size, PartCount: 1}
	c := callerFrom(ctx)
	if err := s.catalog.CreateUpload(ctx, c, u); err != nil {
		return nil, storeError(err, "taskset")
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	if err := s.bucket.Put(ctx, u.ObjectKey, f, kind); err != nil {
		return nil, err
	}
	if err := s.catalog.SettleUpload(ctx, u, kind, ""); err != nil {
		return nil, err
	}
	return &stagedOutput{Body: uploadView(u)}, nil
}

// sniff is the type of bytes whose first 512 are head: sniffed, refined by the name's extension
// when the sniff says only "some bytes" or "some text".
func sniff(head []byte, name string) string {
	kind := http.DetectContentType(head)
	generic := kind == "application/octet-stream" || strings.HasPrefix(kind, "text/plain")
	if byExt := mime.TypeByExtension(path.Ext(name)); generic && byExt != "" {
		if kind == "application/octet-stream" || strings.HasPrefix(byExt, "text/") || strings.Contains(byExt, "json") {
			return byExt
		}
	}
	return kind
}

type deleteUploadInput struct {
	TasksetID uuid.UUID `query:"taskset_id" required:"true"`
	URL       string    `query:"url" required:"true" maxLength:"1000" doc:"the file's storage:// locator"`
}

type deleteUploadOutput struct {
	Body struct {
		Deleted bool `json:"deleted"`
	}
}

// deleteUpload serves DELETE /v2/uploads.
func (s *Server) deleteUpload(ctx context.Context, in *deleteUploadInput) (*deleteUploadOutput, error) {
	ts, id, ok := catalog.ParseLocator(in.URL)
	if !ok || ts != in.TasksetID {
		return nil, validation("query.url", "not a storage:// locator of this taskset's uploads", in.URL)
	}
	u, err := s.catalog.DeleteUpload(ctx, callerFrom(ctx), in.TasksetID, id)
	if err != nil {
		return nil, storeError(err, "taskset")
	}
	out := &deleteUploadOutput{}
	if u == nil {
		return out, nil
	}
	out.Body.Deleted = true
	if s.bucket != nil {
		keys := []string{u.ObjectKey}
		for n := 1; u.Mode == catalog.UploadMultipart && n <= u.PartCount; n++ {
			keys = append(keys, u.PartKey(n))
		}
		for _, k := range keys {
			// Retired, not deleted: the upload URLs may still be live (see blob.Retire).
			if err := blob.Retire(ctx, s.bucket, k); err != nil {
				s.log.WarnContext(ctx, "remove a deleted upload's bytes", "upload", u.ID, "key", k, "error", err)
			}
		}
	}
	return out, nil
}
