package httpapi

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
)

// toFixture points a signed URL of the local bucket at the fixture's server.
func (f *fixture) toFixture(signed string) string {
	u, err := url.Parse(signed)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.srv.URL + u.Path + "?" + u.RawQuery
}

func (f *fixture) putBytes(signed string, body []byte) int {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPut, f.toFixture(signed), bytes.NewReader(body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func (f *fixture) getBytes(signed string) []byte {
	f.t.Helper()
	res, err := http.Get(f.toFixture(signed))
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		f.t.Fatalf("GET %s = %d %s", signed, res.StatusCode, b)
	}
	return b
}

// Task attachments: single-part and multipart uploads through presigned URLs, verification of
// size, checksum and type, briefs that list and zip what their task refers to, and deletion
// refused while a task refers to the file; on both stores.
func TestUploads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		bucket, err := blob.NewLocalBucket(t.TempDir(), blob.Options{PublicBaseURL: "http://files.test", SigningKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, s, Options{Bucket: bucket, Blob: bucket.Handler(),
			Uploads: UploadLimits{MaxBytes: 100, PartBytes: 10, AllowedTypes: []string{"text/*", "application/pdf"}}})
		tasksetID, ids := reviewSetup(t, f)
		q := "/v2/uploads?taskset_id=" + tasksetID.String()
		create := func(name string, data []byte, contentType, sum string) UploadView {
			t.Helper()
			body := map[string]any{"name": name, "size": len(data), "content_type": contentType}
			if sum != "" {
				body["sha256"] = sum
			}
			b, _ := json.Marshal(body)
			return decode[UploadView](t, f.do("POST", q, "session", bytes.NewReader(b)))
		}
		complete := func(id uuid.UUID) response {
			return f.do("POST", "/v2/uploads/complete?taskset_id="+tasksetID.String(), "session", strings.NewReader(`{"upload_id":"`+id.String()+`"}`))
		}

		// Uploads are for signed-in people.
		wantEnvelope(t, f.do("POST", q, "key", strings.NewReader(`{"name":"a.txt","size":1,"content_type":"text/plain"}`)), 401, "unauthorized")

		// Single part, with a checksum.
		notes := []byte("hi notes")
		sum := sha256.Sum256(notes)
		single := create("notes.txt", notes, "text/plain", hex.EncodeToString(sum[:]))
		if single.Mode != "single" || single.UploadURL == "" || single.Status != "pending" ||
			single.URL != fmt.Sprintf("storage://uploads/%s/%s/notes.txt", tasksetID, single.UploadID) {
			t.Fatalf("single = %+v", single)
		}
		wantEnvelope(t, complete(single.UploadID), 409, "conflict") // nothing uploaded yet
		if code := f.putBytes(single.UploadURL, notes); code/100 != 2 {
			t.Fatalf("PUT = %d", code)
		}
		if done := decode[UploadView](t, complete(single.UploadID)); done.Status != "staged" || done.Size != int64(len(notes)) {
			t.Errorf("completed = %+v", done)
		}

		// Multipart: 25 bytes in parts of 10; a missing part is named, presigned again, then joined.
		report := []byte("%PDF-1.4 part one two end")
		multi := create("report.pdf", report, "application/pdf", "")
		if multi.Mode != "multipart" || len(multi.Parts) != 3 || multi.PartSize != 10 || multi.Parts[2].Size != 5 {
			t.Fatalf("multipart = %+v", multi)
		}
		f.putBytes(multi.Parts[0].UploadURL, report[:10])
		f.putBytes(multi.Parts[2].UploadURL, report[20:])
		if r := complete(multi.UploadID); r.status != 409 || !strings.Contains(string(r.body), "2") {
			t.Errorf("complete with part 2 missing = %d %s", r.status, r.body)
		}
		again := decode[UploadView](t, f.do("POST", "/v2/uploads/parts?taskset_id="+tasksetID.String(), "session",
			strings.NewReader(`{"upload_id":"`+multi.UploadID.String()+`","part_numbers":[2]}`)))
		if len(again.Parts) != 1 || again.Parts[0].PartNumber != 2 {
			t.Fatalf("presigned again = %+v", again)
		}
		wantValidation(t, f.do("POST", "/v2/uploads/parts?taskset_id="+tasksetID.String(), "session",
			strings.NewReader(`{"upload_id":"`+multi.UploadID.String()+`","part_numbers":[4]}`)), "body.part_numbers")
		f.putBytes(again.Parts[0].UploadURL, report[10:20])
		if done := decode[UploadView](t, complete(multi.UploadID)); done.Status != "staged" || done.Size != 25 {
			t.Errorf("multipart completed = %+v", done)
		}

		// Verification failures: a wrong checksum, bytes of a type not allowed.
		bad := create("bad.txt", []byte("12345"), "text/plain", strings.Repeat("0", 64))
		f.putBytes(bad.UploadURL, []byte("12345"))
		if r := complete(bad.UploadID); r.status != 409 || !strings.Contains(string(r.body), "SHA-256") {
			t.Errorf("a wrong checksum = %d %s", r.status, r.body)
		}
		png := create("fake.txt", []byte("\x89PNG\r\n\x1a\n"), "text/plain", "")
		f.putBytes(png.UploadURL, []byte("\x89PNG\r\n\x1a\n"))
		if r := complete(png.UploadID); r.status != 409 || !strings.Contains(string(r.body), "image/png") {
			t.Errorf("PNG bytes declared as text = %d %s", r.status, r.body)
		}
		wantEnvelope(t, f.do("POST", q, "session", strings.NewReader(`{"name":"big.txt","size":101,"content_type":"text/plain"}`)), 413, "payload_too_large")
		wantEnvelope(t, f.do("POST", q, "session", strings.NewReader(`{"name":"x.png","size":1,"content_type":"image/png"}`)), 415, "unsupported_media_type")
		wantValidation(t, f.do("POST", q, "session", strings.NewReader(`{"name":"../x","size":1,"content_type":"text/plain"}`)), "body.name")
		wantEnvelope(t, f.do("POST", "/v2/uploads?taskset_id="+uuid.NewString(), "session", strings.NewReader(`{"name":"a","size":1,"content_type":"text/plain"}`)), 404, "not_found")

		// The page form stores a file at once, staged, its type sniffed.
		var form bytes.Buffer
		mw := multipart.NewWriter(&form)
		fw, _ := mw.CreateFormFile("file", "table.csv")
		fw.Write([]byte("a,b\n1,2\n"))
		mw.Close()
		req, _ := http.NewRequest("POST", f.srv.URL+q, &form)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: f.session})
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		formBody, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var staged UploadView
		if json.Unmarshal(formBody, &staged); res.StatusCode != 200 || staged.Status != "staged" || staged.Size != 8 || staged.ContentType != "text/csv; charset=utf-8" ||
			!strings.HasSuffix(staged.URL, "/table.csv") {
			t.Errorf("a form upload = %d %s", res.StatusCode, formBody)
		}
		wantEnvelope(t, f.do("POST", q, "session", strings.NewReader(`not json`)), 400, "bad_request")
		wantValidation(t, f.do("POST", q, "session", strings.NewReader(`{"name":"a.txt","size":-1,"content_type":"","sha256":"x"}`)), "body.size", "body.content_type", "body.sha256")

		// Another team sees none of it.
		other, err := s.CreateTeam(ctx, "beta")
		if err != nil {
			t.Fatal(err)
		}
		_, om, _ := s.AddMember(ctx, other.ID, "Eve", "eve@example.com", models.RoleOwner)
		_, evesSession, _ := s.CreateSession(ctx, om.ID, nil, 3600e9)
		eve := *f
		eve.session = evesSession
		wantEnvelope(t, eve.do("POST", q, "session", strings.NewReader(`{"name":"a.txt","size":1,"content_type":"text/plain"}`)), 404, "not_found")
		wantEnvelope(t, eve.do("POST", "/v2/uploads/complete?taskset_id="+tasksetID.String(), "session", strings.NewReader(`{"upload_id":"`+single.UploadID.String()+`"}`)), 404, "not_found")
		wantEnvelope(t, eve.do("DELETE", q+"&url="+url.QueryEscape(bad.URL), "session", nil), 404, "not_found")

		// A task that refers to the files lists them in its brief and carries them in its zip.
		up := fmt.Sprintf(`{"taskset_id":%q,"tasks":[{"name":"alpha","prompt":"Read %s and %s","external_id":"a-1"}]}`, tasksetID, single.URL, multi.URL)
		if r := f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(up)); r.status != 201 {
			t.Fatalf("upload tasks = %d %s", r.status, r.body)
		}
		brief := decode[struct {
			Attachments []Attachment `json:"attachments"`
		}](t, f.do("GET", "/v2/tasks/"+ids[0].String()+"/brief", "session", nil))
		if len(brief.Attachments) != 2 || brief.Attachments[0].Name != "notes.txt" || brief.Attachments[1].StorageURL != multi.URL ||
			brief.Attachments[1].Status != "staged" || brief.Attachments[1].Size != 25 {
			t.Fatalf("brief attachments = %+v", brief.Attachments)
		}
		if got := f.getBytes(brief.Attachments[1].URL); !bytes.Equal(got, report) {
			t.Errorf("the joined file = %q, want %q", got, report)
		}
		dl := f.do("GET", "/v2/tasks/"+ids[0].String()+"/brief/download", "session", nil)
		zr, err := zip.NewReader(bytes.NewReader(dl.body), int64(len(dl.body)))
		if err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, zf := range zr.File {
			names = append(names, zf.Name)
		}
		if strings.Join(names, ",") != "prompt.md,task.json,attachments/notes.txt,attachments/report.pdf" {
			t.Errorf("zip = %v", names)
		}

		// Deletion: refused while referred to; the rest goes, bytes and all.
		del := func(loc string) response {
			return f.do("DELETE", q+"&url="+url.QueryEscape(loc), "session", nil)
		}
		if r := del(single.URL); r.status != 409 || !strings.Contains(string(r.body), "alpha") {
			t.Errorf("delete a referenced file = %d %s", r.status, r.body)
		}
		if r := decode[struct{ Deleted bool }](t, del(bad.URL)); !r.Deleted {
			t.Errorf("delete = %+v", r)
		}
		if r := decode[struct{ Deleted bool }](t, del(bad.URL)); r.Deleted {
			t.Errorf("delete again = %+v", r)
		}
		wantValidation(t, del("https://example.com/x"), "query.url")
		wantValidation(t, f.do("DELETE", q, "session", nil), "query.url")
		// What is gone leaves an empty placeholder, so that its upload URLs cannot write again.
		objs, _ := bucket.List(ctx, "uploads/")
		var kept []blob.Attrs
		for _, o := range objs {
			if o.ContentType != blob.RetiredContentType || o.Size != 0 {
				kept = append(kept, o)
			}
		}
		if len(kept) != 3 {
			t.Errorf("stored objects after deletes = %+v; want the three staged files only (parts joined and retired)", kept)
		}
	})
}
