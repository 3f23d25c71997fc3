package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/models"
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

func (s *Server) registerUploads() {
	tags := []string{"Uploads"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "create-upload", Method: http.MethodPost, Path: "/uploads", Tags: tags, Summary: "Stage a file for a taskset's task briefs",
		Description: "Answers presigned PUTs for the bytes: one (`mode` single) when the file fits in one part, else one per part " +
			"(`mode` multipart). Then POST /v2/uploads/complete. The `url` is the file's storage:// locator: a task refers to the file by " +
			"putting it in its content (prompt, arguments…), and its brief then lists it. Size and type are checked against the server's " +
			"limits before any byte is stored.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusServiceUnavailable},
	}, authSession), s.createUpload)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "presign-upload-parts", Method: http.MethodPost, Path: "/uploads/parts", Tags: tags, Summary: "Presign parts of a multipart upload again",
		Description: "Fresh PUT URLs for the given parts (or every part), for when earlier ones expired.",
		Errors:      []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable},
	}, authSession), s.presignUploadParts)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "complete-upload", Method: http.MethodPost, Path: "/uploads/complete", Tags: tags, Summary: "Verify a staged upload",
		Description: "Joins a multipart upload's parts, then checks the stored bytes: their size, their SHA-256 when one was declared, and " +
			"their type (sniffed) against the allowed types. A mismatch fails the upload (409, status failed) and removes its bytes.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable},
	}, authSession), s.completeUpload)
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
	UploadURL   string       `json:"upload_url,omitempty" doc:"single mode, while pending: PUT the bytes here"`
	PartSize    int64        `json:"part_size,omitempty" doc:"multipart mode: the size of every part but the last"`
	Parts       []UploadPart `json:"parts,omitempty" doc:"multipart mode, while pending: a PUT per part"`
	ExpiresAt   *time.Time   `json:"expires_at,omitempty" doc:"when the upload URLs expire"`
}

func uploadView(u *models.StagedFile) UploadView {
	v := UploadView{Mode: u.Mode, UploadID: u.ID, URL: u.Locator(), Name: u.Name, Size: u.SizeBytes, ContentType: u.ContentType, Status: u.Status, Error: u.Error}
	if u.Mode == models.UploadMultipart {
		v.PartSize = u.PartBytes
	}
	return v
}

// presign adds fresh PUT URLs to v: the single object, or the given parts (every part when none).
func (s *Server) presign(ctx context.Context, u *models.StagedFile, v *UploadView, parts []int) error {
	exp := time.Now().Add(uploadURLTTL).UTC()
	v.ExpiresAt = &exp
	if u.Mode == models.UploadSingle {
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

type createUploadInput struct {
	TasksetID uuid.UUID `query:"taskset_id" required:"true"`
	Body      struct {
		Name        string `json:"name" minLength:"1" maxLength:"255"`
		Size        int64  `json:"size" minimum:"0"`
		ContentType string `json:"content_type" minLength:"1" maxLength:"255" example:"application/pdf"`
		SHA256      string `json:"sha256,omitempty" pattern:"^[0-9a-fA-F]{64}$" doc:"the hex SHA-256 of the bytes; complete checks it"`
	}
}

type stagedOutput struct{ Body UploadView }

// createUpload serves POST /v2/uploads.
func (s *Server) createUpload(ctx context.Context, in *createUploadInput) (*stagedOutput, error) {
	if s.bucket == nil {
		return nil, newAPIError(http.StatusServiceUnavailable, "this server stores no files")
	}
	b, lim := in.Body, s.uploads.withDefaults()
	if b.Name == "." || b.Name == ".." || strings.ContainsAny(b.Name, "/\\") || path.Clean(b.Name) != b.Name {
		return nil, storeError(models.ValidationError{{Location: "body.name", Message: "a file name has no slash and is not . or ..", Value: b.Name}}, "")
	}
	if b.Size > lim.MaxBytes {
		return nil, newAPIError(http.StatusRequestEntityTooLarge, fmt.Sprintf("the file is %d bytes; an upload may be at most %d", b.Size, lim.MaxBytes))
	}
	if !lim.allows(b.ContentType) {
		return nil, newAPIError(http.StatusUnsupportedMediaType, fmt.Sprintf("%s files may not be uploaded; allowed: %s", b.ContentType, strings.Join(lim.AllowedTypes, ", ")))
	}
	u := &models.StagedFile{TasksetID: in.TasksetID, Name: b.Name, ContentType: b.ContentType, SizeBytes: b.Size, SHA256: strings.ToLower(b.SHA256),
		Mode: models.UploadSingle, PartBytes: b.Size, PartCount: 1}
	if b.Size > lim.PartBytes {
		u.Mode, u.PartBytes = models.UploadMultipart, lim.PartBytes
		u.PartCount = int((b.Size + lim.PartBytes - 1) / lim.PartBytes)
	}
	if err := s.store.CreateUpload(ctx, callerFrom(ctx), u); err != nil {
		return nil, storeError(err, "taskset")
	}
	out := &stagedOutput{Body: uploadView(u)}
	return out, s.presign(ctx, u, &out.Body, nil)
}

type uploadPartsInput struct {
	TasksetID uuid.UUID `query:"taskset_id" required:"true"`
	Body      struct {
		UploadID    uuid.UUID `json:"upload_id"`
		PartNumbers []int     `json:"part_numbers,omitempty" maxItems:"10000" doc:"the parts to presign again (default: every part)"`
	}
}

// presignUploadParts serves POST /v2/uploads/parts.
func (s *Server) presignUploadParts(ctx context.Context, in *uploadPartsInput) (*stagedOutput, error) {
	if s.bucket == nil {
		return nil, newAPIError(http.StatusServiceUnavailable, "this server stores no files")
	}
	u, err := s.store.GetUpload(ctx, callerFrom(ctx), in.TasksetID, in.Body.UploadID)
	if err != nil {
		return nil, storeError(err, "upload")
	}
	if u.Mode != models.UploadMultipart || u.Status != models.UploadPending {
		return nil, newAPIError(http.StatusConflict, "only a pending multipart upload has parts to presign")
	}
	for _, n := range in.Body.PartNumbers {
		if n < 1 || n > u.PartCount {
			return nil, storeError(models.ValidationError{{Location: "body.part_numbers", Message: fmt.Sprintf("parts are numbered 1 to %d", u.PartCount), Value: n}}, "")
		}
	}
	out := &stagedOutput{Body: uploadView(u)}
	return out, s.presign(ctx, u, &out.Body, in.Body.PartNumbers)
}

type completeUploadInput struct {
	TasksetID uuid.UUID `query:"taskset_id" required:"true"`
	Body      struct {
		UploadID uuid.UUID `json:"upload_id"`
	}
}

// completeUpload serves POST /v2/uploads/complete.
func (s *Server) completeUpload(ctx context.Context, in *completeUploadInput) (*stagedOutput, error) {
	if s.bucket == nil {
		return nil, newAPIError(http.StatusServiceUnavailable, "this server stores no files")
	}
	u, err := s.store.GetUpload(ctx, callerFrom(ctx), in.TasksetID, in.Body.UploadID)
	if err != nil {
		return nil, storeError(err, "upload")
	}
	if u.Status != models.UploadPending {
		return &stagedOutput{Body: uploadView(u)}, nil
	}
	if u.Mode == models.UploadMultipart {
		// Every part must be there at its size before anything is joined.
		var missing []string
		parts := make([]string, u.PartCount)
		for n := 1; n <= u.PartCount; n++ {
			parts[n-1] = u.PartKey(n)
			a, err := s.bucket.Stat(ctx, parts[n-1])
			switch {
			case errors.Is(err, blob.ErrNotFound):
				missing = append(missing, fmt.Sprint(n))
			case err != nil:
				return nil, err
			case a.Size != u.PartSize(n):
				missing = append(missing, fmt.Sprintf("%d (%d bytes, want %d)", n, a.Size, u.PartSize(n)))
			}
		}
		if len(missing) > 0 {
			return nil, newAPIError(http.StatusConflict, "parts not uploaded yet or of the wrong size: "+strings.Join(missing, ", ")+"; PUT them (POST /v2/uploads/parts presigns them again)")
		}
		if err := s.bucket.Compose(ctx, u.ObjectKey, parts, u.ContentType); err != nil {
			return nil, err
		}
		for _, p := range parts {
			if err := s.bucket.Delete(ctx, p); err != nil {
				s.log.WarnContext(ctx, "remove an upload's joined part", "upload", u.ID, "key", p, "error", err)
			}
		}
	}
	failure, kind, err := s.verifyUpload(ctx, u)
	if err != nil {
		return nil, err
	}
	if failure != "" {
		if err := s.bucket.Delete(ctx, u.ObjectKey); err != nil {
			s.log.WarnContext(ctx, "remove a failed upload's bytes", "upload", u.ID, "error", err)
		}
	}
	if err := s.store.SettleUpload(ctx, u, kind, failure); err != nil {
		return nil, err
	}
	if failure != "" {
		return nil, newAPIError(http.StatusConflict, "the upload failed verification: "+failure)
	}
	return &stagedOutput{Body: uploadView(u)}, nil
}

// verifyUpload reads the stored bytes once: their size, SHA-256 and sniffed type. failure says
// what did not match ("" when all did); kind is the type to record.
func (s *Server) verifyUpload(ctx context.Context, u *models.StagedFile) (failure, kind string, err error) {
	r, err := s.bucket.Get(ctx, u.ObjectKey)
	if errors.Is(err, blob.ErrNotFound) {
		return "", "", newAPIError(http.StatusConflict, "nothing was uploaded yet: PUT the bytes to the upload URL first")
	} else if err != nil {
		return "", "", err
	}
	defer r.Close()
	h := sha256.New()
	head := make([]byte, 512)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", "", err
	}
	h.Write(head[:n])
	rest, err := io.Copy(h, r)
	if err != nil {
		return "", "", err
	}
	size := int64(n) + rest
	sniffed := http.DetectContentType(head[:n])
	kind = u.ContentType
	lim := s.uploads.withDefaults()
	switch {
	case size != u.SizeBytes:
		return fmt.Sprintf("%d bytes were stored, %d declared", size, u.SizeBytes), kind, nil
	case u.SHA256 != "" && hex.EncodeToString(h.Sum(nil)) != u.SHA256:
		return "the stored bytes' SHA-256 is not the declared one", kind, nil
	case sniffed != "application/octet-stream" && !strings.HasPrefix(sniffed, "text/plain") && !lim.allows(sniffed):
		return fmt.Sprintf("the bytes are %s, which may not be uploaded", sniffed), kind, nil
	}
	return "", kind, nil
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
	ts, id, ok := models.ParseLocator(in.URL)
	if !ok || ts != in.TasksetID {
		return nil, storeError(models.ValidationError{{Location: "query.url", Message: "not a storage:// locator of this taskset's uploads", Value: in.URL}}, "")
	}
	u, err := s.store.DeleteUpload(ctx, callerFrom(ctx), in.TasksetID, id)
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
		for n := 1; u.Mode == models.UploadMultipart && n <= u.PartCount; n++ {
			keys = append(keys, u.PartKey(n))
		}
		for _, k := range keys {
			if err := s.bucket.Delete(ctx, k); err != nil {
				s.log.WarnContext(ctx, "remove a deleted upload's bytes", "upload", u.ID, "key", k, "error", err)
			}
		}
	}
	return out, nil
}
