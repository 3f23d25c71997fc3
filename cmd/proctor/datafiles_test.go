package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

type dataFileRow struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Group       string  `json:"group"`
	Scope       string  `json:"scope"`
	Status      string  `json:"status"`
	SizeBytes   int64   `json:"size_bytes"`
	ContentType string  `json:"content_type"`
	CanEdit     bool    `json:"can_edit"`
	OwnerName   string  `json:"owner_name"`
	DownloadURL *string `json:"download_url"`
}

// put uploads body to a presigned URL.
func put(t *testing.T, url, contentType string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// checkDataFiles drives the data-file store on a dev whose teams may keep 4 KiB of files of at
// most 3 KiB each: reserve → PUT → complete (size and type read from the stored bytes), list by
// scope, groups, usage, rename, download, quota refusals, tenancy (a teammate and another team),
// and all-or-nothing deletion.
func checkDataFiles(t *testing.T, c, mate, stranger api) {
	t.Helper()
	type reserved struct {
		File      dataFileRow `json:"file"`
		UploadURL string      `json:"upload_url"`
	}
	upload := func(who api, name, group, scope string, body []byte, contentType string) dataFileRow {
		t.Helper()
		var r reserved
		req := map[string]any{"name": name, "size_bytes": len(body)}
		if group != "" {
			req["group"] = group
		}
		if scope != "" {
			req["scope"] = scope
		}
		if code := who.call("POST", "/v2/data", req, &r); code != 201 ||
			r.File.Status != "pending" || r.UploadURL == "" {
			t.Fatalf("reserve %s = %d %+v", name, code, r)
		}
		if code := who.call("POST", "/v2/data/"+r.File.ID+"/complete", nil, nil); code != 409 {
			t.Errorf("complete before the upload = %d, want 409", code)
		}
		if code := put(t, r.UploadURL, contentType, body); code/100 != 2 {
			t.Fatalf("PUT %s = %d", name, code)
		}
		var done dataFileRow
		if code := who.call("POST", "/v2/data/"+r.File.ID+"/complete", nil, &done); code != 200 || done.Status != "ready" || done.SizeBytes != int64(len(body)) {
			t.Fatalf("complete %s = %d %+v", name, code, done)
		}
		return done
	}
	csv := upload(c, "runs.csv", "reports/2026", "team", []byte("task,reward\ntodo,1\n"), "image/png") // the client's type is not believed
	if csv.ContentType != "text/csv; charset=utf-8" || csv.Scope != "team" || !csv.CanEdit || csv.Group != "reports/2026" {
		t.Errorf("a CSV file = %+v", csv)
	}
	png := upload(c, "shot.png", "", "member", append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 200)...), "text/plain")
	if png.ContentType != "image/png" || png.Scope != "member" {
		t.Errorf("a PNG file = %+v", png)
	}
	notes := upload(mate, "notes.txt", "", "", []byte("mine"), "text/plain")
	if notes.Scope != "member" {
		t.Errorf("default scope = %+v", notes)
	}

	// Listing by scope; a teammate sees the team's files and their own, not the member's.
	var page struct {
		Items []dataFileRow
		Total int
	}
	for who, want := range map[string][]string{"c all": {"shot.png", "runs.csv"}, "c member": {"shot.png"}, "c team": {"runs.csv"}, "mate all": {"notes.txt", "runs.csv"}} {
		client, scope, _ := strings.Cut(who, " ")
		a := c
		if client == "mate" {
			a = mate
		}
		a.call("GET", "/v2/data?scope="+scope, nil, &page)
		got := []string{}
		for _, f := range page.Items {
			got = append(got, f.Name)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") || page.Total != len(want) {
			t.Errorf("%s's %s files = %v (total %d), want %v", client, scope, got, page.Total, want)
		}
	}
	if code := mate.call("GET", "/v2/data/"+png.ID, nil, nil); code != 404 {
		t.Errorf("a teammate reads a member file = %d, want 404", code)
	}
	var teamCSV dataFileRow
	if mate.call("GET", "/v2/data/"+csv.ID, nil, &teamCSV); teamCSV.CanEdit || teamCSV.DownloadURL == nil {
		t.Errorf("a teammate's view of a team file = %+v", teamCSV)
	} else if res, err := http.Get(*teamCSV.DownloadURL); err != nil || res.StatusCode != 200 {
		t.Errorf("download = %v %v", res, err)
	} else {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(b) != "task,reward\ntodo,1\n" {
			t.Errorf("downloaded %q", b)
		}
	}
	if code := mate.call("PATCH", "/v2/data/"+csv.ID, map[string]any{"name": "mine.csv"}, nil); code != 403 {
		t.Errorf("a teammate renames the owner's team file = %d, want 403", code)
	}
	for what, code := range map[string]int{
		"list":  stranger.call("GET", "/v2/data", nil, &page),
		"get":   stranger.call("GET", "/v2/data/"+csv.ID, nil, nil),
		"patch": stranger.call("PATCH", "/v2/data/"+csv.ID, map[string]any{"name": "x"}, nil),
	} {
		if (what == "list" && (code != 200 || page.Total != 0)) || (what != "list" && code != 404) {
			t.Errorf("another team's %s = %d (%d files)", what, code, page.Total)
		}
	}

	// Groups and usage.
	var groups struct {
		Groups []struct {
			Name      string
			FileCount int   `json:"file_count"`
			SizeBytes int64 `json:"size_bytes"`
		}
	}
	if c.call("GET", "/v2/data/groups", nil, &groups); len(groups.Groups) != 2 || groups.Groups[0].Name != "" || groups.Groups[1].Name != "reports/2026" ||
		groups.Groups[1].FileCount != 1 {
		t.Errorf("groups = %+v", groups)
	}
	var usage struct {
		UsedBytes int64 `json:"used_bytes"`
		FileCount int   `json:"file_count"`
		Limits    struct {
			TeamBytes int64 `json:"team_bytes"`
			FileBytes int64 `json:"file_bytes"`
		}
	}
	used := csv.SizeBytes + png.SizeBytes + notes.SizeBytes
	if c.call("GET", "/v2/data/usage", nil, &usage); usage.UsedBytes != used || usage.FileCount != 3 || usage.Limits.TeamBytes != 4096 || usage.Limits.FileBytes != 3072 {
		t.Errorf("usage = %+v, want %d bytes used", usage, used)
	}

	// Rename and move; names are unique per scope and folder.
	var moved dataFileRow
	if code := c.call("PATCH", "/v2/data/"+csv.ID, map[string]any{"name": "all.csv", "group": ""}, &moved); code != 200 || moved.Name != "all.csv" || moved.Group != "" {
		t.Errorf("rename = %d %+v", code, moved)
	}
	for name, body := range map[string]map[string]any{
		"a taken name": {"name": "all.csv", "scope": "team", "size_bytes": 1},
		"a bad name":   {"name": "../x", "size_bytes": 1},
		"a bad group":  {"name": "y", "group": "a//b", "size_bytes": 1},
		"too big":      {"name": "big.bin", "size_bytes": 3073},
		"a bad scope":  {"name": "z", "scope": "world", "size_bytes": 1},
	} {
		want := map[string]int{"a taken name": 409, "too big": 413}[name]
		if want == 0 {
			want = 422
		}
		if code := c.call("POST", "/v2/data", body, nil); code != want {
			t.Errorf("reserve %s = %d, want %d", name, code, want)
		}
	}
	// A pending reservation holds its declared size: the next reserve past the quota is refused.
	var held reserved
	if code := c.call("POST", "/v2/data", map[string]any{"name": "held.bin", "size_bytes": 3000}, &held); code != 201 {
		t.Errorf("reserve 3000 bytes = %d", code)
	}
	if code := c.call("POST", "/v2/data", map[string]any{"name": "more.bin", "size_bytes": 1000}, nil); code != 413 {
		t.Errorf("reserve past the quota = %d, want 413", code)
	}
	// A client that uploads more than it declared is held to the quota at complete.
	var liar reserved
	c.call("POST", "/v2/data", map[string]any{"name": "liar.bin", "size_bytes": 10}, &liar)
	put(t, liar.UploadURL, "application/octet-stream", make([]byte, 3500))
	if code := c.call("POST", "/v2/data/"+liar.File.ID+"/complete", nil, nil); code != 413 {
		t.Errorf("complete past the quota = %d, want 413", code)
	}

	// Deletion is all or nothing.
	if code := mate.call("POST", "/v2/data/delete", map[string]any{"ids": []string{notes.ID, csv.ID}}, nil); code != 403 {
		t.Errorf("a teammate deleting the owner's file with their own = %d, want 403", code)
	}
	if code := c.call("POST", "/v2/data/delete", map[string]any{"ids": []string{png.ID, uuid.NewString()}}, nil); code != 404 {
		t.Errorf("deleting with an unknown id = %d, want 404", code)
	}
	if code := mate.call("GET", "/v2/data/"+notes.ID, nil, nil); code != 200 {
		t.Errorf("after a refused delete the file is gone: %d", code)
	}
	if code := c.call("POST", "/v2/data/delete", map[string]any{"ids": []string{png.ID, csv.ID, liar.File.ID, held.File.ID}}, nil); code != 204 {
		t.Errorf("delete = %d", code)
	}
	if c.call("GET", "/v2/data/usage", nil, &usage); usage.UsedBytes != notes.SizeBytes || usage.FileCount != 1 {
		t.Errorf("usage after delete = %+v", usage)
	}
	if res, err := http.Get(*teamCSV.DownloadURL); err == nil && res.StatusCode == 200 {
		res.Body.Close()
		t.Error("a deleted file's bytes still download")
	}
}
