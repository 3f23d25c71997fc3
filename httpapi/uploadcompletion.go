package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

// registerUploadCompletion registers the second half of a presigned upload: its parts presigned
// again, then its completion.
func (s *Server) registerUploadCompletion() {
	tags := []string{"Uploads"}
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
	if err := s.requireBucket(); err != nil {
		return nil, err
	}
	u, err := s.catalog.GetUpload(ctx, callerFrom(ctx), in.TasksetID, in.Body.UploadID)
	if err != nil {
		return nil, storeError(err, "upload")
	}
	if u.Mode != catalog.UploadMultipart || u.Status != catalog.UploadPending {
		return nil, newAPIError(http.StatusConflict, "only a pending multipart upload has parts to presign")
	}
	for _, n := range in.Body.PartNumbers {
		if n < 1 || n > u.PartCount {
			return nil, validation("body.part_numbers", fmt.Sprintf("parts are numbered 1 to %d", u.PartCount), n)
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
	if err := s.requireBucket(); err != nil {
		return nil, err
	}
	u, err := s.catalog.GetUpload(ctx, callerFrom(ctx), in.TasksetID, in.Body.UploadID)
	if err != nil {
		return nil, storeError(err, "upload")
	}
	if u.Status != catalog.UploadPending {
		return &stagedOutput{Body: uploadView(u)}, nil
	}
	if u.Mode == catalog.UploadMultipart {
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
				// A part URL only creates: the wrong part goes, so that it can be PUT again.
				if err := s.bucket.Delete(ctx, parts[n-1]); err != nil {
					return nil, err
				}
			}
		}
		if len(missing) > 0 {
			return nil, newAPIError(http.StatusConflict, "parts not uploaded yet or of the wrong size: "+strings.Join(missing, ", ")+"; PUT them (POST /v2/uploads/parts presigns them again)")
		}
		if err := s.bucket.Compose(ctx, u.ObjectKey, parts, u.ContentType); err != nil {
			return nil, err
		}
		for _, p := range parts {
			// Retired, not deleted: a part's URL may still be live (see blob.Retire).
			if err := blob.Retire(ctx, s.bucket, p); err != nil {
				s.log.WarnContext(ctx, "remove an upload's joined part", "upload", u.ID, "key", p, "error", err)
			}
		}
	}
	failure, kind, err := s.verifyUpload(ctx, u)
	if err != nil {
		return nil, err
	}
	if failure != "" {
		// A failed upload is settled for good; its URL must not write again.
		if err := blob.Retire(ctx, s.bucket, u.ObjectKey); err != nil {
			s.log.WarnContext(ctx, "remove a failed upload's bytes", "upload", u.ID, "error", err)
		}
	}
	if err := s.catalog.SettleUpload(ctx, u, kind, failure); err != nil {
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
