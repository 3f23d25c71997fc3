package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/httpapi"
)

// deployCertify is a deploy's --certify: the taskset whose tasks certify the build once it
// succeeded (the trigger's certify), and k.
type deployCertify struct {
	taskset *string
	k       *int
}

func deployCertifyFlags(fs *flag.FlagSet) deployCertify {
	return deployCertify{
		taskset: fs.String("certify", "", "certify the build on this taskset once it succeeded (the oracle --k times, the idle and random agents and the "+
			"tamper probe once per task of the environment); it becomes the latest only if the certification passed"),
		k: fs.Int("k", 5, "with --certify: the oracle's attempts per task (1..20)"),
	}
}

// asked reports whether the deploy asks for a certification.
func (d deployCertify) asked() bool { return d.taskset != nil && *d.taskset != "" }

// trigger adds the certification to a build's trigger body.
func (d deployCertify) trigger(ctx context.Context, c *apiClient, body map[string]any) error {
	id, err := c.tasksetByName(ctx, *d.taskset)
	if err != nil {
		return err
	}
	body["certify"] = map[string]any{"taskset_id": id, "k": *d.k}
	return nil
}

// await waits for the certification a succeeded build asked for to start (its build's log says
// when it could not), follows its job on progress, and answers it once its figures are recorded.
func (d deployCertify) await(ctx context.Context, c *apiClient, buildID string, progress io.Writer) (httpapi.Certification, error) {
	var cert httpapi.Certification
	path := "/v2/builds/" + buildID + "/certification"
	logSeq := -1 // the build's log read so far
	for deadline := time.Now().Add(recordWithin); ; {
		err := c.do(ctx, http.MethodGet, path, nil, &cert)
		var ae *apiError
		if err == nil {
			break
		}
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			return cert, err
		}
		if why, err := c.buildLogLine(ctx, buildID, "certification not started: ", &logSeq); err != nil || why != "" {
			return cert, cmp.Or(err, fmt.Errorf("build %s: %s", buildID, why))
		}
		if time.Now().After(deadline) {
			return cert, fmt.Errorf("build %s succeeded and its certification did not start within %s (its workflow is build/%s)", buildID, recordWithin, buildID)
		}
		select {
		case <-ctx.Done():
			return cert, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if _, err := c.follow(ctx, cert.JobID.String(), progress); err != nil {
		return cert, err
	}
	err := awaitRecorded(ctx, c, path, &cert, func(c *httpapi.Certification) (uuid.UUID, string) { return c.ID, c.Status },
		"certification", "certify/"+cert.ID.String())
	return cert, err
}

// gate waits for the certification a deploy asked for (none: nil) and prints it; an error, and
// how to make the build the latest anyway, when it did not pass.
func (d deployCertify) gate(ctx context.Context, c *apiClient, buildID, name string, stdout, progress io.Writer) error {
	if !d.asked() {
		return nil
	}
	cert, err := d.await(ctx, c, buildID, progress)
	if err != nil {
		return err
	}
	if err := printCertification(stdout, cert); err != nil {
		fmt.Fprintf(stdout, "not made the latest of %s (its certification did not pass); make it the latest anyway with: proctor env set-latest %s --force\n",
			name, buildID)
		return err
	}
	return nil
}

// buildLogLine is the first line of a build's log after *after that starts with prefix, "" for
// none; the log is read to its end, page by page, and *after moves past what was read.
func (c *apiClient) buildLogLine(ctx context.Context, buildID, prefix string, after *int) (string, error) {
	for {
		var page struct {
			Logs []struct {
				Seq  int    `json:"seq"`
				Line string `json:"line"`
			} `json:"logs"`
			HasMore bool `json:"has_more"`
		}
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/builds/%s/logs?after_seq=%d&limit=1000", buildID, *after), nil, &page); err != nil {
			return "", err
		}
		for _, l := range page.Logs {
			*after = l.Seq
			if strings.HasPrefix(l.Line, prefix) {
				return l.Line, nil
			}
		}
		if !page.HasMore || len(page.Logs) == 0 {
			return "", nil
		}
	}
}
