package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strconv"
	"time"
)

// exportRetries bounds how often `proctor export` resumes a stream that broke off.
const exportRetries = 5

// cmdExport writes a job's attempts as JSON Lines (GET /v2/jobs/{id}/export) to stdout, with
// its progress on stderr; a stream that breaks off is resumed from the last line written, so
// the output holds each attempt once.
func cmdExport(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		validOnly := fs.Bool("valid-only", false, "leave out invalidated attempts")
		minReward := fs.String("min-reward", "", "only attempts with a reward of at least this")
		maxReward := fs.String("max-reward", "", "only attempts with a reward of at most this")
		status := fs.String("status", "", "only attempts in these statuses (comma-separated: completed,error,…)")
		category := fs.String("category", "", "only one category: successful, failed, no_score or live")
		format := fs.String("format", "jsonl", "the output's format: jsonl (one attempt a line, resumed where it broke off), parquet (one file, a row an attempt) or harbor (Harbor's job folders: a trial folder an attempt, under --out)")
		outDir := fs.String("out", "", "with --format harbor: the folder the job's folder is written in")
		return clientCommand(func(ctx context.Context, c *apiClient, pos []string) (err error) {
			switch {
			case *format != "jsonl" && *format != "parquet" && *format != "harbor":
				return usagef("--format %s: jsonl (one attempt a line), parquet or harbor", *format)
			case *format == "harbor" && *outDir == "":
				return usagef("--format harbor writes folders: name where with --out DIR")
			case *format != "harbor" && *outDir != "":
				return usagef("--out is for --format harbor; the other formats go to standard output")
			}
			if pos[0], err = c.resolveID(ctx, "job", pos[0]); err != nil {
				return err
			}
			q := url.Values{}
			if *validOnly {
				q.Set("valid_only", "true")
			}
			for name, v := range map[string]string{"min_reward": *minReward, "max_reward": *maxReward} {
				if v == "" {
					continue
				}
				if _, err := strconv.ParseFloat(v, 64); err != nil {
					return usagef("--%s %q: want a number", name, v)
				}
				q.Set(name, v)
			}
			if *status != "" {
				q.Set("status", *status)
			}
			if *category != "" {
				q.Set("category", *category)
			}
			if *format == "parquet" {
				q.Set("format", "parquet")
				return exportParquet(ctx, c, pos[0], q, stdout, stderr)
			}
			if *format == "harbor" {
				h := &harborWriter{dir: *outDir}
				if err := exportJob(ctx, c, pos[0], q, h, stderr); err != nil {
					return err
				}
				if err := h.close(); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%d trials written in Harbor's layout to %s\n", h.job.NTotalTrials, filepath.Join(*outDir, h.job.ID))
				return nil
			}
			return exportJob(ctx, c, pos[0], q, stdout, stderr)
		})(fs)
	}
}

// exportParquet copies the job's Parquet export to out, saying on progress how much it wrote. A
// Parquet file is whole only with its footer, which comes last: one that breaks off is an error
// (run again), never a shorter file that reads as complete.
func exportParquet(ctx context.Context, c *apiClient, jobID string, q url.Values, out, progress io.Writer) error {
	body, err := c.stream(ctx, "/v2/jobs/"+url.PathEscape(jobID)+"/export?"+q.Encode())
	if err != nil {
		return err
	}
	defer body.Close()
	start := time.Now()
	n, err := io.Copy(out, body)
	if err != nil {
		return fmt.Errorf("the Parquet export broke off after %d bytes (%w): run again", n, err)
	}
	fmt.Fprintf(progress, "%d bytes of Parquet exported in %s\n", n, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// exportJob copies the export's lines to out, resuming from the last whole line when the stream
// breaks off.
func exportJob(ctx context.Context, c *apiClient, jobID string, q url.Values, out, progress io.Writer) error {
	w := bufio.NewWriter(out)
	defer w.Flush()
	var n, retries int
	cursor := ""
	start, reported := time.Now(), time.Now()
	for {
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		body, err := c.stream(ctx, "/v2/jobs/"+url.PathEscape(jobID)+"/export?"+q.Encode())
		if err != nil {
			return err
		}
		r := bufio.NewReaderSize(body, 1<<20)
		var rerr error
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				// A line without its newline is cut off: it is read again on resuming.
				rerr = err
				break
			}
			var head struct {
				Cursor string `json:"cursor"`
			}
			if err := json.Unmarshal(line, &head); err != nil || head.Cursor == "" {
				body.Close()
				return fmt.Errorf("export line %d: not an attempt: %.200s", n+1, line)
			}
			if _, err := w.Write(line); err != nil {
				body.Close()
				return err
			}
			cursor = head.Cursor
			n++
			if time.Since(reported) > time.Second {
				fmt.Fprintf(progress, "\r%d attempts exported", n)
				reported = time.Now()
			}
		}
		body.Close()
		if errors.Is(rerr, io.EOF) {
			fmt.Fprintf(progress, "\r%d attempts exported in %s\n", n, time.Since(start).Round(100*time.Millisecond))
			return w.Flush()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if retries++; retries > exportRetries {
			return fmt.Errorf("the export broke off %d times (last: %v); %d attempts were written: run again to start over", retries, rerr, n)
		}
		fmt.Fprintf(progress, "\rthe export broke off after %d attempts (%v); resuming\n", n, rerr)
	}
}
