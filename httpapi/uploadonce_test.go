package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/datafiles"
)

type reservedData struct {
	File      DataFile `json:"file"`
	UploadURL string   `json:"upload_url"`
}

// A presigned upload URL writes once: after complete it cannot replace the verified bytes, and
// after a delete it cannot put back bytes that no record accounts for (issue 29, item 5).
func TestUploadURLsWriteOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		bucket, err := blob.NewLocalBucket(t.TempDir(), blob.Options{PublicBaseURL: "http://files.test", SigningKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, s, Options{Bucket: bucket, Blob: bucket.Handler(),
			Uploads: UploadLimits{MaxBytes: 100, PartBytes: 10, AllowedTypes: []string{"text/*"}}})
		stored := func(key string) []byte {
			t.Helper()
			r, err := bucket.Get(t.Context(), key)
			if err != nil {
				t.Fatalf("Get(%q): %v", key, err)
			}
			defer r.Close()
			b, _ := io.ReadAll(r)
			return b
		}
		html := []byte("<html><script>alert(1)</script></html>")

		t.Run("DataFileAfterComplete", func(t *testing.T) {
			reserved := decode[reservedData](t, f.do("POST", "/v2/data", "key", strings.NewReader(`{"name":"ten.txt","size_bytes":10}`)))
			if code := f.putBytes(reserved.UploadURL, []byte("0123456789")); code != http.StatusOK {
				t.Fatalf("first PUT = %d, want 200", code)
			}
			done := decode[DataFile](t, f.do("POST", "/v2/data/"+reserved.File.ID.String()+"/complete", "key", nil))
			if code := f.putBytes(reserved.UploadURL, html); code != http.StatusPreconditionFailed {
				t.Errorf("a second PUT after complete = %d, want 412", code)
			}
			row, err := datafiles.Of(s).GetDataFile(t.Context(), f.caller, done.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := stored(row.ObjectKey); string(got) != "0123456789" {
				t.Errorf("stored bytes after the second PUT = %q, want the 10 verified ones", got)
			}
		})

		t.Run("DataFileAfterDelete", func(t *testing.T) {
			reserved := decode[reservedData](t, f.do("POST", "/v2/data", "key", strings.NewReader(`{"name":"gone.txt","size_bytes":5}`)))
			row, err := datafiles.Of(s).GetDataFile(t.Context(), f.caller, reserved.File.ID)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(map[string]any{"ids": []string{reserved.File.ID.String()}})
			if r := f.do("POST", "/v2/data/delete", "key", bytes.NewReader(body)); r.status/100 != 2 {
				t.Fatalf("delete = %d %s", r.status, r.body)
			}
			if code := f.putBytes(reserved.UploadURL, html); code != http.StatusPreconditionFailed {
				t.Errorf("a PUT after delete = %d, want 412", code)
			}
			if got := stored(row.ObjectKey); len(got) != 0 {
				t.Errorf("bytes after a PUT to a deleted file's URL = %q, want none", got)
			}
		})

		t.Run("BriefUploadAfterItsChecksum", func(t *testing.T) {
			tasksetID, _ := reviewSetup(t, f)
			notes := []byte("hi notes")
			sum := sha256.Sum256(notes)
			b, _ := json.Marshal(map[string]any{"name": "notes.txt", "size": len(notes), "content_type": "text/plain", "sha256": hex.EncodeToString(sum[:])})
			up := decode[UploadView](t, f.do("POST", "/v2/uploads?taskset_id="+tasksetID.String(), "session", bytes.NewReader(b)))
			if code := f.putBytes(up.UploadURL, notes); code != http.StatusOK {
				t.Fatalf("first PUT = %d, want 200", code)
			}
			if done := decode[UploadView](t, f.do("POST", "/v2/uploads/complete?taskset_id="+tasksetID.String(), "session",
				strings.NewReader(`{"upload_id":"`+up.UploadID.String()+`"}`))); done.Status != "staged" {
				t.Fatalf("completed = %+v", done)
			}
			if code := f.putBytes(up.UploadURL, []byte("evil tex")); code != http.StatusPreconditionFailed {
				t.Errorf("a PUT after the checksum passed = %d, want 412", code)
			}
			u, err := catalog.Of(s).GetUpload(t.Context(), f.caller, tasksetID, up.UploadID)
			if err != nil {
				t.Fatal(err)
			}
			if got := stored(u.ObjectKey); !bytes.Equal(got, notes) {
				t.Errorf("stored bytes = %q, want the verified %q", got, notes)
			}
		})
	})
}
