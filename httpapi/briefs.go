package httpapi

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

// Attachment is a file staged for a task brief.
type Attachment struct {
	Name        string     `json:"name"`
	ArchivedAt  *time.Time `json:"archived_at"`
	ContentType string     `json:"content_type"`
	Error       string     `json:"error"`
	Size        int64      `json:"size"`
	Status      string     `json:"status" example:"staged"`
	StorageURL  string     `json:"storage_url"`
	URL         string     `json:"url" doc:"Presigned download URL"`
}

type briefOutput struct {
	Body struct {
		Prompt      string       `json:"prompt"`
		Attachments []Attachment `json:"attachments" nullable:"false"`
	}
}

type briefDownloadOutput struct {
	ContentType        string `header:"Content-Type"`
	ContentDisposition string `header:"Content-Disposition"`
	Body               []byte
}

// registerTaskBriefs registers a task's brief, read and downloaded (browser sessions only).
func (s *Server) registerTaskBriefs() {
	tags := []string{"Tasks"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-task-brief", Method: http.MethodGet, Path: "/tasks/{task_id}/brief", Tags: tags,
		Summary:     "A task's brief",
		Description: "The prompt and attachments a person works from. Browser session only: an API key gets 401.",
		Errors:      []int{http.StatusNotFound},
	}, authSession), s.getTaskBrief)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "download-task-brief", Method: http.MethodGet, Path: "/tasks/{task_id}/brief/download", Tags: tags,
		Summary:     "Download a task's brief",
		Description: "A zip of the prompt (prompt.md), the task in the export shape (task.json) and its attachments. Browser session only.",
		Errors:      []int{http.StatusNotFound},
		Responses:   map[string]*huma.Response{"200": {Description: "A zip archive", Content: map[string]*huma.MediaType{"application/zip": {}}}},
	}, authSession), s.downloadTaskBrief)
}

// getTaskBrief serves GET /v2/tasks/{task_id}/brief: a task's brief.
func (s *Server) getTaskBrief(ctx context.Context, in *taskPath) (*briefOutput, error) {
	b, err := s.catalog.GetTaskBrief(ctx, callerFrom(ctx), in.TaskID)
	if err != nil {
		return nil, storeError(err, "task")
	}
	ups, err := s.catalog.BriefAttachments(ctx, b)
	if err != nil {
		return nil, err
	}
	out := &briefOutput{}
	out.Body.Prompt, out.Body.Attachments = b.Prompt, make([]Attachment, len(ups))
	for i := range ups {
		u := &ups[i]
		a := Attachment{Name: u.Name, ContentType: u.ContentType, Error: u.Error, Size: u.SizeBytes, Status: u.Status, StorageURL: u.Locator()}
		if u.Status == catalog.UploadStaged && s.bucket != nil {
			if a.URL, err = s.bucket.SignedURL(ctx, u.ObjectKey, http.MethodGet, downloadURLTTL); err != nil {
				return nil, err
			}
		}
		out.Body.Attachments[i] = a
	}
	return out, nil
}

// maxBriefZipAttachments bounds the attachment bytes a brief's zip carries (it is built in memory).
const maxBriefZipAttachments = 256 << 20

// downloadTaskBrief serves GET /v2/tasks/{task_id}/brief/download: download a task's brief.
func (s *Server) downloadTaskBrief(ctx context.Context, in *taskPath) (*briefDownloadOutput, error) {
	b, err := s.catalog.GetTaskBrief(ctx, callerFrom(ctx), in.TaskID)
	if err != nil {
		return nil, storeError(err, "task")
	}
	ups, err := s.catalog.BriefAttachments(ctx, b)
	if err != nil {
		return nil, err
	}
	var staged []models.StagedFile
	var total int64
	for _, u := range ups {
		if u.Status == catalog.UploadStaged {
			staged = append(staged, u)
			total += u.SizeBytes
		}
	}
	if total > maxBriefZipAttachments {
		return nil, newAPIError(http.StatusRequestEntityTooLarge, fmt.Sprintf("the brief's attachments take %d bytes, more than a zip carries (%d): download them from the brief's URLs", total, maxBriefZipAttachments))
	}
	zipped, err := s.briefZip(ctx, b, staged)
	if err != nil {
		return nil, err
	}
	return &briefDownloadOutput{
		ContentType:        "application/zip",
		ContentDisposition: fmt.Sprintf("attachment; filename=%q", safeFilename(b.Task.Name)+"-brief.zip"),
		Body:               zipped,
	}, nil
}

// briefZip is a brief as a zip: prompt.md, task.json and its staged attachments under
// attachments/.
func (s *Server) briefZip(ctx context.Context, b *catalog.TaskBrief, attachments []models.StagedFile) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	task, err := json.MarshalIndent(ExportedTask{
		Name: b.Version.Name, ExternalID: deref(b.Task.ExternalID), Description: b.Version.Description, Env: b.Version.Env,
		Scenario: b.Version.Scenario, Args: nonNilMap(b.Version.Args), Prompt: b.Version.Prompt, SystemPrompt: b.Version.SystemPrompt,
		AgentConfig: b.Version.AgentConfig, RuntimeConfig: b.Version.RuntimeConfig, Validation: nonNilSlice(b.Version.Validation),
		Keywords: b.Version.Keywords, Metadata: b.Version.Metadata,
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"prompt.md", []byte(b.Prompt)}, {"task.json", task}} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: b.Version.CreatedAt})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, u := range attachments {
		name := u.Name
		if seen[name] { // two files of one name: the later ones carry their upload id
			name = u.ID.String() + "-" + name
		}
		seen[name] = true
		w, err := zw.CreateHeader(&zip.FileHeader{Name: "attachments/" + name, Method: zip.Deflate, Modified: u.CreatedAt})
		if err != nil {
			return nil, err
		}
		r, err := s.bucket.Get(ctx, u.ObjectKey)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(w, r)
		r.Close()
		if err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// safeFilename keeps a name usable in Content-Disposition and on every file system.
func safeFilename(name string) string {
	out := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, name)
	if out == "" {
		out = "task"
	}
	return out
}
