package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/proctorhq/proctor/internal/archive"
)

// deployBuild is the part of a build the deploy command shows.
type deployBuild struct {
	ID           string  `json:"id"`
	RegistryID   string  `json:"registry_id"`
	Version      int     `json:"version"`
	Status       string  `json:"status"`
	Digest       string  `json:"digest"`
	ImageName    string  `json:"image_name"`
	ErrorMessage string  `json:"error_message"`
	Duration     float64 `json:"duration_seconds"`
}

// cmdEnvDeploy builds an environment from a source directory: it packs and uploads the source,
// triggers a build and follows its log, makes the build the latest (unless --no-promote), and
// prints the scenarios it found.
func cmdEnvDeploy(stdout, stderr io.Writer) flagsBody {
	return deployCommand("environment", "main package", "(make this one latest later with: proctor env set-latest BUILD)", stdout, stderr,
		func(ctx context.Context, c *apiClient, b deployBuild, _ string) error {
			return c.printScenarios(ctx, b, stdout)
		})
}

// deployCommand is the deploy of a source directory as kind ("environment" or "agent"): pack
// and upload it, trigger its build and follow its log, make the build the latest (unless
// --no-promote), then done, for what each kind says after.
func deployCommand(kind, entryHolds, laterHint string, stdout, stderr io.Writer, done func(ctx context.Context, c *apiClient, b deployBuild, name string) error) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		name := fs.String("name", "", "the "+kind+"'s name (default: the directory's name)")
		entry := fs.String("entry-folder", "", "the folder of DIR that holds the "+kind+"'s "+entryHolds+" (default: DIR itself)")
		noPromote := fs.Bool("no-promote", false, "keep the "+kind+"'s latest build: new runs go on using it "+laterHint)
		// What the build records of where agents run: an agent's own placement, or whether an
		// environment takes agents inside.
		trigger := map[string]any{}
		var certify deployCertify
		if kind == "agent" {
			trigger["kind"] = kind
			fs.BoolFunc("inside", "run the agent inside the environment, in its working directory, for an agent that works with its own shell and file tools (the environment must accept it: env deploy --agents-inside)", func(v string) error {
				on, err := strconv.ParseBool(v)
				if on {
					trigger["placement"] = "inside"
				} else {
					delete(trigger, "placement")
				}
				return err
			})
		} else {
			certify = deployCertifyFlags(fs)
			fs.BoolFunc("agents-inside", "let brought agents deployed with --inside run in this environment's working directory", func(v string) error {
				on, err := strconv.ParseBool(v)
				if on {
					trigger["runtime_config"] = map[string]any{"agents_inside": true}
				} else {
					delete(trigger, "runtime_config")
				}
				return err
			})
		}
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			dir, err := filepath.Abs(pos[0])
			if err != nil {
				return err
			}
			if *name == "" {
				*name = filepath.Base(dir)
			}
			c, err := client()
			if err != nil {
				return err
			}
			start := time.Now()
			archive, files, err := packUpload(dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "packed %s: %d files, %s\n", pos[0], files, humanBytes(len(archive)))
			if certify.asked() {
				if err := certify.trigger(ctx, c, trigger); err != nil {
					return err
				}
			}
			b, err := c.buildSource(ctx, archive, *name, *entry, trigger, stdout)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "build %s %s in %s\n", b.ID, b.Status, time.Since(start).Round(100*time.Millisecond))
			if b.Status != "succeeded" {
				return fmt.Errorf("build %s %s: %s", b.ID, b.Status, b.ErrorMessage)
			}
			fmt.Fprintf(stdout, "image %s  %s\n", b.ImageName, b.Digest)
			if err := certify.gate(ctx, c, b.ID, *name, stdout, stderr); err != nil {
				return err
			}
			if err := reportLatest(ctx, c, b, *name, !*noPromote, false, true, stdout); err != nil {
				return err
			}
			return done(ctx, c, b, *name)
		}
	}
}

// buildSource uploads a source archive, builds it as the environment name (its main package in
// entry, when not the root; with the trigger's fields extra) while printing the build's log, and
// answers the build as it ended.
func (c *apiClient) buildSource(ctx context.Context, archive []byte, name, entry string, extra map[string]any, stdout io.Writer) (deployBuild, error) {
	var b deployBuild
	buildID, err := c.uploadSource(ctx, archive)
	if err != nil {
		return b, err
	}
	body := map[string]any{"build_id": buildID, "name": name, "source": "cli"}
	if entry != "" {
		body["entry_folder"] = filepath.ToSlash(entry)
	}
	maps.Copy(body, extra)
	if err := c.do(ctx, http.MethodPost, "/v2/builds/trigger", body, &b); err != nil {
		return b, err
	}
	fmt.Fprintf(stdout, "build %s of %s: %s\n", b.ID, name, b.Status)
	if err := followBuild(ctx, c, b.ID, stdout); err != nil {
		return b, err
	}
	err = c.do(ctx, http.MethodGet, "/v2/builds/"+b.ID+"/status", nil, &b)
	return b, err
}

// uploadSource puts a source archive where a new build reads it, and answers that build's id.
func (c *apiClient) uploadSource(ctx context.Context, archive []byte) (string, error) {
	var up struct {
		UploadURL string `json:"upload_url"`
		BuildID   string `json:"build_id"`
	}
	if err := c.do(ctx, http.MethodPost, "/v2/builds/upload-url", nil, &up); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, up.UploadURL, bytes.NewReader(archive))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/gzip")
	res, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("upload the source: %w", err)
	}
	res.Body.Close()
	if res.StatusCode >= 300 {
		return "", fmt.Errorf("upload the source: HTTP %d", res.StatusCode)
	}
	return up.BuildID, nil
}

// printScenarios prints the scenarios a build of an environment declares.
func (c *apiClient) printScenarios(ctx context.Context, b deployBuild, stdout io.Writer) error {
	var scenarios []struct {
		Slug        string `json:"slug"`
		Description string `json:"description"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/registry/"+b.RegistryID+"/scenarios?build_id="+b.ID, nil, &scenarios); err != nil {
		return err
	}
	tw := newTable(stdout, "SCENARIO", "DESCRIPTION")
	for _, sc := range scenarios {
		fmt.Fprintf(tw, "%s\t%s\n", sc.Slug, sc.Description)
	}
	tw.Flush()
	if len(scenarios) == 0 {
		fmt.Fprintln(stdout, "(the environment declares no scenarios)")
	}
	return nil
}

// cmdEnvList lists the environments the caller can run: each one's scenarios and latest build.
func cmdEnvList(stdout io.Writer) flagsBody {
	return listCommand[environmentRow]{
		path: "/v2/registry", limit: 50, limitUsage: "at most this many (1..500)",
		flags: func(fs *flag.FlagSet) func(url.Values) {
			search := searchFlag(fs)
			return func(q url.Values) {
				q.Set("sort_by", "name")
				q.Set("include_latest_scenarios", "true")
				search(q)
			}
		},
		columns: []string{"NAME", "SCENARIOS", "LATEST BUILD", "VISIBILITY", "UPDATED", "ID"},
		row: func(r environmentRow) []any {
			latest, vis := "(none succeeded yet)", "private"
			if r.LatestBuildID != nil {
				latest = *r.LatestBuildID
			}
			if r.Public {
				vis = "public"
			}
			return []any{r.Name, len(r.LatestScenarios), latest, vis, r.UpdatedAt.Local().Format("2006-01-02 15:04"), r.ID}
		},
	}.body(stdout)
}

// environmentRow is an environment as `proctor env list` shows it.
type environmentRow struct {
	ID              string     `json:"id"`
	Name            string     `json:"name"`
	Public          bool       `json:"public"`
	LatestBuildID   *string    `json:"latest_build_id"`
	LatestScenarios []struct{} `json:"latest_scenarios"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

// followBuild prints a build's log as it is written, and its status as it changes, until the
// build has ended and its whole log has been printed.
func followBuild(ctx context.Context, c *apiClient, id string, stdout io.Writer) error {
	after, status := -1, ""
	for {
		var page struct {
			Status string `json:"status"`
			Logs   []struct {
				Seq  int    `json:"seq"`
				Line string `json:"line"`
			} `json:"logs"`
			HasMore bool `json:"has_more"`
			Done    bool `json:"done"`
		}
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/builds/%s/logs?after_seq=%d", id, after), nil, &page); err != nil {
			return err
		}
		if page.Status != status && !terminalBuild(page.Status) {
			fmt.Fprintf(stdout, "── %s\n", page.Status)
		}
		status = page.Status
		for _, l := range page.Logs {
			fmt.Fprintf(stdout, "   %s\n", l.Line)
			after = l.Seq
		}
		if page.Done {
			return nil
		}
		if page.HasMore {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func terminalBuild(status string) bool {
	return status == "succeeded" || status == "failed" || status == "cancelled"
}

// notIgnored keeps what a source archive of dir holds: all but .git and what .gitignore and
// .dockerignore at its root name (their negations, "!", are not supported).
func notIgnored(dir string) func(rel string, isDir bool) bool {
	ignore := ignorePatterns(dir)
	return func(rel string, isDir bool) bool {
		return path.Base(rel) != ".git" && !ignored(ignore, rel, isDir)
	}
}

// packUpload packs what a source archive of dir holds (notIgnored), for upload; a symlink that
// leads out of it, which the server would refuse after the upload, is refused here, naming it.
func packUpload(dir string) ([]byte, int, error) {
	keep := notIgnored(dir)
	rel, target, err := archive.LinkOutside(dir, keep)
	if err != nil {
		return nil, 0, err
	}
	if rel != "" {
		return nil, 0, fmt.Errorf("%s is a symlink to %s, outside the folder: a source may hold only links within it (the server refuses the upload); "+
			"copy what it points to in its place (cp -L), make it a relative link within the folder, or ignore it in .dockerignore", filepath.Join(dir, rel), target)
	}
	return packSource(dir, keep)
}

// packSource archives what keep keeps of dir (all of it when keep is nil) as a gzipped tar
// (see archive.WriteTar), at gzip's fastest level: a build context may hold a whole root file
// system (an agent's Node and its libraries), which the default level takes seconds to pack for
// an upload only a few percent smaller.
func packSource(dir string, keep func(rel string, isDir bool) bool) ([]byte, int, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, 0, err
	}
	files, err := archive.WriteTar(gz, dir, keep)
	if err != nil {
		return nil, 0, err
	}
	if err := gz.Close(); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), files, nil
}

// ignorePatterns reads the patterns of dir's .gitignore and .dockerignore.
func ignorePatterns(dir string) []string {
	var out []string
	for _, name := range []string{".gitignore", ".dockerignore"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "!") {
				out = append(out, line)
			}
		}
		f.Close()
	}
	return out
}

// ignored reports whether rel matches a pattern: anchored ones ("/x", "a/b") against the whole
// path, others against any of its names; a trailing "/" matches directories only.
func ignored(patterns []string, rel string, isDir bool) bool {
	for _, p := range patterns {
		dirOnly := strings.HasSuffix(p, "/")
		p = strings.TrimSuffix(p, "/")
		if dirOnly && !isDir {
			continue
		}
		if strings.Contains(strings.TrimPrefix(p, "/"), "/") || strings.HasPrefix(p, "/") {
			if ok, _ := path.Match(strings.TrimPrefix(p, "/"), rel); ok {
				return true
			}
			continue
		}
		for _, part := range strings.Split(rel, "/") {
			if ok, _ := path.Match(p, part); ok {
				return true
			}
		}
	}
	return false
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
