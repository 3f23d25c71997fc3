package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// apiClient talks to a Proctor API with an API key.
type apiClient struct {
	base string
	key  string
	http *http.Client
}

// clientFlags are the connection flags every client command takes. Without them the local dev
// instance is used: its credentials file under --data-dir names the URL and the key.
func clientFlags(fs *flag.FlagSet) func() (*apiClient, error) {
	apiURL := fs.String("api-url", os.Getenv("PROCTOR_API_URL"), "API base URL (env PROCTOR_API_URL; default: the local dev instance)")
	apiKey := fs.String("api-key", os.Getenv("PROCTOR_API_KEY"), "API key (env PROCTOR_API_KEY; default: the dev instance's key)")
	dataDir := fs.String("data-dir", envOrDefault("PROCTOR_DATA_DIR", ".proctor"), "dev data directory whose credentials are used by default (env PROCTOR_DATA_DIR)")
	return func() (*apiClient, error) {
		c := &apiClient{base: *apiURL, key: *apiKey, http: &http.Client{Timeout: 5 * time.Minute}}
		if c.base == "" || c.key == "" {
			// The data dir's instance, else the last dev started by this user (from any directory).
			for _, path := range []string{filepath.Join(*dataDir, credentialsFile), userCredentialsPath()} {
				var creds devInfo
				b, err := os.ReadFile(path)
				if path == "" || err != nil || json.Unmarshal(b, &creds) != nil || creds.APIKey == "" {
					continue
				}
				if c.base == "" {
					c.base = creds.APIURL
				}
				if c.key == "" {
					c.key = creds.APIKey
				}
				break
			}
		}
		if c.base == "" {
			c.base = "http://127.0.0.1:8080"
		}
		if c.key == "" {
			return nil, errors.New("no API key: set PROCTOR_API_KEY (or --api-key), or start `proctor dev` (its key is found from any directory)")
		}
		c.base = strings.TrimRight(c.base, "/")
		return c, nil
	}
}

// userCredentialsPath is where dev keeps the credentials of the last instance this user started,
// for client commands run from any directory: $PROCTOR_CONFIG_DIR/credentials.json, else
// <user config dir>/proctor/credentials.json ("" when neither is known).
func userCredentialsPath() string {
	dir := os.Getenv("PROCTOR_CONFIG_DIR")
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(base, "proctor")
	}
	return filepath.Join(dir, credentialsFile)
}

func envOrDefault(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// apiError is an error answer of the API, with the validation details of a 422.
type apiError struct {
	Status  int
	Code    string
	Message string
	Fields  []string
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
	if e.Code != "" {
		msg = fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Message, e.Status)
	}
	if len(e.Fields) > 0 {
		msg += "\n  " + strings.Join(e.Fields, "\n  ")
	}
	return msg
}

// do sends a request and decodes a JSON answer into out (when not nil).
func (c *apiClient) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return unreachable(c.base, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode >= 400 {
		return errorOf(res.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return nil
}

// errorOf is the error of an answer with an error status, from its envelope or its
// validation errors.
func errorOf(status int, data []byte) *apiError {
	e := &apiError{Status: status, Message: strings.TrimSpace(string(data))}
	var env struct {
		Error  struct{ Code, Message string } `json:"error"`
		Detail string                         `json:"detail"`
		Errors []struct {
			Location, Message string
			Value             any
		} `json:"errors"`
	}
	if json.Unmarshal(data, &env) == nil {
		switch {
		case env.Error.Message != "":
			e.Code, e.Message = env.Error.Code, env.Error.Message
		case env.Detail != "":
			e.Code, e.Message = "invalid", env.Detail
			for _, f := range env.Errors {
				e.Fields = append(e.Fields, fmt.Sprintf("%s: %s", f.Location, f.Message))
			}
		}
	}
	return e
}

// stream GETs path and hands back its body to read as it arrives (no overall timeout: the
// context ends it), or the answer's error.
func (c *apiClient) stream(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	res, err := (&http.Client{Transport: c.http.Transport}).Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, unreachable(c.base, err)
	}
	if res.StatusCode >= 400 {
		defer res.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return nil, errorOf(res.StatusCode, data)
	}
	return res.Body, nil
}

// allItems reads every item of a paged list route (path, with the query of its filters if any),
// 500 a page.
func allItems[T any](ctx context.Context, c *apiClient, path string) ([]T, error) {
	items := []T{}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	for off := 0; ; off += 500 {
		var page struct {
			Items []T `json:"items"`
			Total int `json:"total"`
		}
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("%s%slimit=500&offset=%d", path, sep, off), nil, &page); err != nil {
			return nil, err
		}
		items = append(items, page.Items...)
		if len(page.Items) == 0 || off+len(page.Items) >= page.Total {
			return items, nil
		}
	}
}

func cmdTasksUpload(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		taskset := fs.String("taskset", "", "taskset name (default: the file's taskset_name/name, else the file's base name)")
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			body, err := readTaskFile(pos[0])
			if err != nil {
				return err
			}
			if *taskset != "" {
				body["taskset_name"] = *taskset
				delete(body, "taskset_id")
			} else if body["taskset_name"] == nil && body["name"] == nil && body["taskset_id"] == nil {
				body["taskset_name"] = strings.TrimSuffix(filepath.Base(pos[0]), filepath.Ext(pos[0]))
			}
			c, err := client()
			if err != nil {
				return err
			}
			// An export names its taskset by the id it had where it came from: on another instance the
			// name is what holds.
			if id, ok := body["taskset_id"].(string); ok && *taskset == "" {
				err := c.do(ctx, http.MethodGet, "/v2/tasksets/"+url.PathEscape(id), nil, nil)
				var ae *apiError
				if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusUnprocessableEntity) {
					delete(body, "taskset_id")
					if body["taskset_name"] == nil {
						body["taskset_name"] = body["name"]
					}
					if body["taskset_name"] == nil {
						body["taskset_name"] = strings.TrimSuffix(filepath.Base(pos[0]), filepath.Ext(pos[0]))
					}
					fmt.Fprintf(stderr, "the file's taskset %s is not on this server: uploading into the taskset named %v\n", id, body["taskset_name"])
				} else if err != nil {
					return err
				}
			}
			var res struct {
				TasksetID      string   `json:"taskset_id"`
				TasksetName    string   `json:"taskset_name"`
				TaskCount      int      `json:"task_count"`
				TaskVersionIDs []string `json:"task_version_ids"`
				TasksCreated   int      `json:"tasks_created"`
				TasksUpdated   int      `json:"tasks_updated"`
			}
			if err := c.do(ctx, http.MethodPost, "/v2/tasks/upload", body, &res); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "uploaded %d tasks to %s (%s): %d created, %d updated, %d unchanged\n", res.TaskCount, res.TasksetName, res.TasksetID,
				res.TasksCreated, res.TasksUpdated, res.TaskCount-res.TasksCreated-res.TasksUpdated)
			return nil
		}
	}
}

// readTaskFile reads an upload body: a JSON object (an export or an upload body), a JSON array of
// tasks, or JSON Lines with one task per line.
func readTaskFile(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(data)
	if strings.HasSuffix(path, ".jsonl") || strings.HasSuffix(path, ".ndjson") {
		var tasks []any
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Bytes()
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var t map[string]any
			if err := json.Unmarshal(line, &t); err != nil {
				at := strings.TrimPrefix(jsonErrorAt("", line, err), ":1:")
				if at != "" {
					at = ":" + at
				}
				return nil, fmt.Errorf("%s:%d%s: not a JSON object: %w", path, n, at, err)
			}
			tasks = append(tasks, t)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return map[string]any{"tasks": tasks}, nil
	}
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var tasks []any
		if err := json.Unmarshal(data, &tasks); err != nil {
			return nil, fmt.Errorf("%s: %w", jsonErrorAt(path, data, err), err)
		}
		return map[string]any{"tasks": tasks}, nil
	}
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, fmt.Errorf("%s: want a JSON object with tasks, a JSON array of tasks, or .jsonl: %w", jsonErrorAt(path, data, err), err)
	}
	return body, nil
}

// jsonErrorAt is "path:line:column" where a JSON syntax or type error lies in data, as editors
// and compilers point at a place; just path when the error carries no offset.
func jsonErrorAt(path string, data []byte, err error) string {
	var offset int64
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		offset = syn.Offset
	case errors.As(err, &typ):
		offset = typ.Offset
	default:
		return path
	}
	// The offset counts the bytes read, the offending one included: point at that one.
	offset = max(0, min(offset-1, int64(len(data))))
	before := data[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("%s:%d:%d", path, line, col)
}

func cmdTasksExport(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		out := fs.String("o", "", "write to this file instead of standard output")
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			var export json.RawMessage
			if err := c.do(ctx, http.MethodGet, "/v2/tasksets/by-name/"+url.PathEscape(pos[0]), nil, &export); err != nil {
				return err
			}
			var pretty bytes.Buffer
			json.Indent(&pretty, export, "", "  ") //nolint:errcheck // the API answered valid JSON
			pretty.WriteByte('\n')
			if *out == "" {
				_, err = stdout.Write(pretty.Bytes())
				return err
			}
			return os.WriteFile(*out, pretty.Bytes(), 0o644)
		}
	}
}

// cmdTasksetsShow prints a taskset's tasks, those that match --search and --keyword when given.
func cmdTasksetsShow(stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		search := fs.String("search", "", "only tasks whose name, description or a keyword contains this (case-insensitive)")
		keyword := fs.String("keyword", "", "only tasks with this keyword (whole, case-insensitive)")
		return jsonClientCommand(func(ctx context.Context, c *apiClient, pos []string, asJSON bool) error {
			filter := url.Values{}
			if *search != "" {
				filter.Set("search", *search)
			}
			if *keyword != "" {
				filter.Set("keyword", *keyword)
			}
			if asJSON {
				return showTasksetJSON(ctx, c, pos[0], filter, stdout)
			}
			return showTaskset(ctx, c, pos[0], filter, stdout)
		})(fs)
	}
}

// cmdTasksetsList lists the team's tasksets (or every team's public ones).
func cmdTasksetsList(stdout io.Writer) flagsBody {
	return listCommand[tasksetRow]{
		path: "/v2/tasksets", limit: 50, limitUsage: "at most this many (1..500)",
		flags: func(fs *flag.FlagSet) func(url.Values) {
			search := searchFlag(fs)
			public := fs.Bool("public", false, "public tasksets of every team")
			sort := fs.String("sort", "starred", "starred, date, name, stars or tasks")
			return func(q url.Values) {
				q.Set("sort_by", *sort)
				search(q)
				if *public {
					q.Set("public_only", "true")
				}
			}
		},
		columns: []string{"NAME", "TASKS", "VISIBILITY", "OWNER", "UPDATED", "ID"},
		row: func(t tasksetRow) []any {
			vis, owner := "private", "shared"
			if t.Public {
				vis = "public"
			}
			if t.IsOwner {
				owner = "yes"
			}
			name := t.Name
			if t.IsStarred {
				name = "★ " + name
			}
			return []any{name, t.TaskCount, vis, owner, t.UpdatedAt.Local().Format("2006-01-02 15:04"), t.ID}
		},
	}.body(stdout)
}

// tasksetRow is a taskset as `proctor tasksets list` shows it.
type tasksetRow struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Public    bool      `json:"public"`
	IsOwner   bool      `json:"is_owner"`
	IsStarred bool      `json:"is_starred"`
	TaskCount int       `json:"task_count"`
	UpdatedAt time.Time `json:"updated_at"`
}
