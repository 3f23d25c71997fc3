package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/datafiles"
)

// dataURLTTL is how long a data file's upload or download URL stays valid.
const dataURLTTL = time.Hour

func (s *Server) registerDataFiles() {
	tags := []string{"Data files"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "reserve-data-file", Method: http.MethodPost, Path: "/data", Tags: tags, Summary: "Reserve a data file",
		Description: "Records a pending file of the caller's (scope member: only they read it; team: every member does) if the team's " +
			"quota holds its declared size, and answers a presigned PUT for its bytes; then POST …/complete. A name is unique within its " +
			"scope and group (a folder path).",
		DefaultStatus: http.StatusCreated,
		Errors:        []int{http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.reserveDataFile)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-data-files", Method: http.MethodGet, Path: "/data", Tags: tags, Summary: "List readable data files",
		Description: "Newest first: `all` is every file the caller may read (the team's and their own), `member` their own member files, `team` the team's.",
	}, authKeyOrSession), s.listDataFiles)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "complete-data-file", Method: http.MethodPost, Path: "/data/{file_id}/complete", Tags: tags, Summary: "Publish an uploaded data file",
		Description: "Reads the stored object: its size and its type (sniffed from its bytes, else from the name's extension) are recorded, " +
			"not what the client declared; a file past the quota is refused and its bytes removed.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.completeDataFile)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-data-groups", Method: http.MethodGet, Path: "/data/groups", Tags: tags, Summary: "Folders of readable data files",
	}, authKeyOrSession), s.listDataGroups)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-data-usage", Method: http.MethodGet, Path: "/data/usage", Tags: tags, Summary: "The team's data storage use and limits",
	}, authKeyOrSession), s.getDataUsage)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "delete-data-files", Method: http.MethodPost, Path: "/data/delete", Tags: tags, Summary: "Delete data files",
		Description:   "All or nothing: if any id is not a file the caller may read (404) or change (403), nothing is deleted. The stored objects are removed.",
		DefaultStatus: http.StatusNoContent, Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession), s.deleteDataFiles)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-data-file", Method: http.MethodGet, Path: "/data/{file_id}", Tags: tags, Summary: "A data file",
		Description: "With a presigned download URL once it is ready.", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getDataFile)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "update-data-file", Method: http.MethodPatch, Path: "/data/{file_id}", Tags: tags, Summary: "Rename or move a data file",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict},
	}, authKeyOrSession), s.updateDataFile)
}

// DataFile is one file of the team's file store.
type DataFile struct {
	ID                uuid.UUID  `json:"id"`
	Name              string     `json:"name"`
	Group             string     `json:"group" doc:"its folder: a slash-separated path, empty for the root"`
	Scope             string     `json:"scope" enum:"member,team"`
	Status            string     `json:"status" enum:"pending,ready" doc:"pending until its upload is completed"`
	SizeBytes         int64      `json:"size_bytes" doc:"the stored object's size (0 while pending)"`
	DeclaredBytes     int64      `json:"declared_bytes" doc:"the size declared at reserve"`
	ContentType       string     `json:"content_type" doc:"the stored bytes' type (empty while pending)"`
	OwnerMembershipID int64      `json:"owner_membership_id"`
	OwnerName         string     `json:"owner_name"`
	CanEdit           bool       `json:"can_edit" doc:"the caller may rename, move or delete it"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
	CompletedAt       *time.Time `json:"completed_at"`
	DownloadURL       *string    `json:"download_url,omitempty" doc:"a presigned GET, valid for an hour (single reads only)"`
}

func dataFileOut(r *datafiles.DataFileRow) DataFile {
	return DataFile{ID: r.ID, Name: r.Name, Group: r.Group, Scope: r.Scope, Status: r.Status, SizeBytes: r.SizeBytes, DeclaredBytes: r.DeclaredBytes,
		ContentType: r.ContentType, OwnerMembershipID: r.MembershipID, OwnerName: r.OwnerName, CanEdit: r.CanEdit, CreatedAt: r.CreatedAt,
		UpdatedAt: r.UpdatedAt, CompletedAt: r.CompletedAt}
}

// requireBucket refuses the file routes (data files, uploads) on a server without a bucket.
func (s *Server) requireBucket() error {
	if s.bucket == nil {
		return newAPIError(http.StatusServiceUnavailable, "this server stores no files")
	}
	return nil
}

// dataError maps quota refusals to 413; the rest as the store's errors.
func dataError(err error) error {
	if errors.Is(err, datafiles.ErrQuota) {
		e := newAPIError(http.StatusRequestEntityTooLarge, err.Error())
		e.ErrorBody.Error.Code = "quota_exceeded"
		return e
	}
	return storeError(err, "data file")
}

// plainName says whether name can be one segment of a path: no slash or backslash, not . or ..
// (file names of data files and uploads, folder names of data files).
func plainName(name string) bool {
	return name != "." && name != ".." && !strings.ContainsAny(name, "/\\")
}

// validName checks a file name (plain, without leading or trailing space) and a group (a relative
// slash-separated path of such names).
func validName(name, group string) error {
	var errs models.ValidationError
	if !plainName(name) || strings.TrimSpace(name) != name {
		errs = append(errs, models.FieldError{Location: "name", Message: "a file name has no slash and no leading or trailing space, and is not . or ..", Value: name})
	}
	if group != "" {
		for _, seg := range strings.Split(group, "/") {
			if seg == "" || !plainName(seg) || strings.TrimSpace(seg) != seg {
				errs = append(errs, models.FieldError{Location: "group", Message: "a group is a relative folder path like reports/2026: no empty, . or .. parts", Value: group})
				break
			}
		}
	}
	if len(errs) > 0 {
		return storeError(errs, "")
	}
	return nil
}

type reserveDataInput struct {
	Body struct {
		Name      string `json:"name" minLength:"1" maxLength:"255"`
		Group     string `json:"group,omitempty" maxLength:"500" doc:"a folder path, e.g. reports/2026 (default: the root)"`
		Scope     string `json:"scope,omitempty" enum:"member,team" default:"member"`
		SizeBytes int64  `json:"size_bytes" minimum:"0" doc:"the size of the bytes to upload, checked against the quota now and again at complete"`
	}
}

type reserveDataOutput struct {
	Body struct {
		File         DataFile  `json:"file"`
		UploadURL    string    `json:"upload_url" doc:"PUT the bytes here, with the Content-Type of your choice; it writes once (a second PUT is refused with 412)"`
		UploadMethod string    `json:"upload_method" enum:"PUT"`
		ExpiresAt    time.Time `json:"expires_at"`
	}
}

// reserveDataFile serves POST /v2/data.
func (s *Server) reserveDataFile(ctx context.Context, in *reserveDataInput) (*reserveDataOutput, error) {
	if err := s.requireBucket(); err != nil {
		return nil, err
	}
	b := in.Body
	if err := validName(b.Name, b.Group); err != nil {
		return nil, err
	}
	row, err := s.datafiles.ReserveDataFile(ctx, callerFrom(ctx), datafiles.NewDataFile{Name: b.Name, Group: b.Group, Scope: b.Scope, DeclaredBytes: b.SizeBytes}, s.dataQuota)
	if err != nil {
		return nil, dataError(err)
	}
	url, err := s.bucket.SignedURL(ctx, row.ObjectKey, http.MethodPut, dataURLTTL)
	if err != nil {
		return nil, err
	}
	out := &reserveDataOutput{}
	out.Body.File, out.Body.UploadURL, out.Body.UploadMethod, out.Body.ExpiresAt = dataFileOut(row), url, http.MethodPut, time.Now().Add(dataURLTTL).UTC()
	return out, nil
}

type dataFilePath struct {
	FileID uuid.UUID `path:"file_id"`
}

type dataFileOutput struct{ Body DataFile }

// completeDataFile serves POST /v2/data/{file_id}/complete.
func (s *Server) completeDataFile(ctx context.Context, in *dataFilePath) (*dataFileOutput, error) {
	if err := s.requireBucket(); err != nil {
		return nil, err
	}
	c := callerFrom(ctx)
	row, err := s.datafiles.GetDataFile(ctx, c, in.FileID)
	if err != nil {
		return nil, storeError(err, "data file")
	}
	if !row.CanEdit {
		return nil, newAPIError(http.StatusForbidden, "the file is "+row.OwnerName+"'s")
	}
	if row.Status == models.DataReady {
		return &dataFileOutput{Body: dataFileOut(row)}, nil
	}
	attrs, err := s.bucket.Stat(ctx, row.ObjectKey)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, newAPIError(http.StatusConflict, "nothing was uploaded for this file yet: PUT its bytes to the upload URL first")
	} else if err != nil {
		return nil, err
	}
	kind, err := s.sniffType(ctx, row.ObjectKey, row.Name)
	if err != nil {
		return nil, err
	}
	done, err := s.datafiles.CompleteDataFile(ctx, c, row.ID, attrs.Size, kind, s.dataQuota)
	if errors.Is(err, datafiles.ErrQuota) {
		// Bytes past the quota are not kept; the reservation stays for a smaller upload.
		if derr := s.bucket.Delete(ctx, row.ObjectKey); derr != nil {
			s.log.WarnContext(ctx, "remove a data file's bytes past the quota", "file", row.ID, "error", derr)
		}
	}
	if err != nil {
		return nil, dataError(err)
	}
	return &dataFileOutput{Body: dataFileOut(done)}, nil
}

// sniffType is the type of a stored object from its first bytes; when they say only "some
// bytes" or "some text", the name's extension may say more.
func (s *Server) sniffType(ctx context.Context, key, name string) (string, error) {
	r, err := s.bucket.Get(ctx, key)
	if err != nil {
		return "", err
	}
	defer r.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	return sniff(head[:n], name), nil
}

type listDataInput struct {
	Scope        string `query:"scope" enum:"all,member,team" default:"all"`
	MembershipID int64  `query:"membership_id" minimum:"0" doc:"only this member's files (of those the caller may read)"`
	Group        string `query:"group" maxLength:"500" doc:"Extension: only the files of this folder"`
	Limit        int    `query:"limit" minimum:"1" maximum:"200" default:"50"`
	Offset       int    `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
}

// listDataFiles serves GET /v2/data.
func (s *Server) listDataFiles(ctx context.Context, in *listDataInput) (*struct{ Body Page[DataFile] }, error) {
	q := datafiles.DataQuery{Scope: in.Scope, Limit: in.Limit, Offset: in.Offset}
	if in.MembershipID > 0 {
		q.MembershipID = &in.MembershipID
	}
	if in.Group != "" {
		q.Group = &in.Group
	}
	rows, total, err := s.datafiles.ListDataFiles(ctx, callerFrom(ctx), q)
	if err != nil {
		return nil, err
	}
	items := make([]DataFile, len(rows))
	for i := range rows {
		items[i] = dataFileOut(&rows[i])
	}
	return &struct{ Body Page[DataFile] }{Body: NewPage(items, total, in.Limit, in.Offset)}, nil
}

// DataGroup is one folder.
type DataGroup struct {
	Name      string    `json:"name" doc:"the folder path; empty for the root"`
	FileCount int       `json:"file_count"`
	SizeBytes int64     `json:"size_bytes"`
	UpdatedAt time.Time `json:"updated_at"`
}

type dataGroupsOutput struct {
	Body struct {
		Groups []DataGroup `json:"groups" nullable:"false"`
	}
}

// listDataGroups serves GET /v2/data/groups.
func (s *Server) listDataGroups(ctx context.Context, _ *struct{}) (*dataGroupsOutput, error) {
	gs, err := s.datafiles.DataGroups(ctx, callerFrom(ctx))
	if err != nil {
		return nil, err
	}
	out := &dataGroupsOutput{}
	out.Body.Groups = make([]DataGroup, len(gs))
	for i, g := range gs {
		out.Body.Groups[i] = DataGroup{Name: g.Name, FileCount: g.Files, SizeBytes: g.Bytes, UpdatedAt: g.UpdatedAt}
	}
	return out, nil
}

// DataLimits are the team's effective limits (0: none).
type DataLimits struct {
	TeamBytes int64 `json:"team_bytes" doc:"what the team's files may take in all"`
	FileBytes int64 `json:"file_bytes" doc:"the largest file"`
	TeamFiles int   `json:"team_files" doc:"how many files the team may have"`
}

type dataUsageOutput struct {
	Body struct {
		UsedBytes     int64      `json:"used_bytes" doc:"ready files at their stored size"`
		ReservedBytes int64      `json:"reserved_bytes" doc:"pending files at their declared size"`
		FileCount     int        `json:"file_count"`
		PendingCount  int        `json:"pending_count"`
		Limits        DataLimits `json:"limits"`
	}
}

// getDataUsage serves GET /v2/data/usage.
func (s *Server) getDataUsage(ctx context.Context, _ *struct{}) (*dataUsageOutput, error) {
	u, err := s.datafiles.DataUsage(ctx, s.store.DB, callerFrom(ctx).TeamID)
	if err != nil {
		return nil, err
	}
	out := &dataUsageOutput{}
	b := &out.Body
	b.UsedBytes, b.ReservedBytes, b.FileCount, b.PendingCount = u.UsedBytes, u.ReservedBytes, u.Files, u.Pending
	b.Limits = DataLimits{TeamBytes: s.dataQuota.TeamBytes, FileBytes: s.dataQuota.FileBytes, TeamFiles: s.dataQuota.TeamFiles}
	return out, nil
}

type deleteDataInput struct {
	Body struct {
		IDs []uuid.UUID `json:"ids" minItems:"1" maxItems:"1000"`
	}
}

// deleteDataFiles serves POST /v2/data/delete.
func (s *Server) deleteDataFiles(ctx context.Context, in *deleteDataInput) (*struct{}, error) {
	keys, err := s.datafiles.DeleteDataFiles(ctx, callerFrom(ctx), in.Body.IDs)
	if err != nil {
		return nil, storeError(err, "data file")
	}
	if s.bucket != nil {
		for _, k := range keys {
			// Retired, not deleted: the file's upload URL may still be live, and it
			// must not put back bytes that no row accounts for.
			if err := blob.Retire(ctx, s.bucket, k); err != nil {
				s.log.WarnContext(ctx, "remove a deleted data file's bytes", "key", k, "error", err)
			}
		}
	}
	return nil, nil
}

// getDataFile serves GET /v2/data/{file_id}.
func (s *Server) getDataFile(ctx context.Context, in *dataFilePath) (*dataFileOutput, error) {
	row, err := s.datafiles.GetDataFile(ctx, callerFrom(ctx), in.FileID)
	if err != nil {
		return nil, storeError(err, "data file")
	}
	out := &dataFileOutput{Body: dataFileOut(row)}
	if row.Status == models.DataReady && s.bucket != nil {
		url, err := s.bucket.SignedURL(ctx, row.ObjectKey, http.MethodGet, dataURLTTL)
		if err != nil {
			return nil, err
		}
		out.Body.DownloadURL = &url
	}
	return out, nil
}

type updateDataInput struct {
	FileID uuid.UUID `path:"file_id"`
	Body   struct {
		Name  *string `json:"name,omitempty" minLength:"1" maxLength:"255"`
		Group *string `json:"group,omitempty" maxLength:"500" doc:"move it to this folder (empty: the root)"`
	}
}

// updateDataFile serves PATCH /v2/data/{file_id}.
func (s *Server) updateDataFile(ctx context.Context, in *updateDataInput) (*dataFileOutput, error) {
	b := in.Body
	if b.Name == nil && b.Group == nil {
		return nil, validation("body", "give name or group", nil)
	}
	name, group := "x", ""
	if b.Name != nil {
		name = *b.Name
	}
	if b.Group != nil {
		group = *b.Group
	}
	if err := validName(name, group); err != nil {
		return nil, err
	}
	row, err := s.datafiles.UpdateDataFile(ctx, callerFrom(ctx), in.FileID, datafiles.DataFileUpdate{Name: b.Name, Group: b.Group})
	if err != nil {
		return nil, storeError(err, "data file")
	}
	return &dataFileOutput{Body: dataFileOut(row)}, nil
}
