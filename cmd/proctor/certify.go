package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/httpapi"
)

// cmdEnvCertify certifies a build: every task of a taskset of its environment run on it by the
// oracle k times and by the idle and random agents once each; it follows the job, then prints each task's figures
// and flags. It fails (exit status 1) when a task is flagged or the job was cancelled.
func cmdEnvCertify(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		taskset := fs.String("taskset", "", "the taskset whose tasks of the build's environment are certified (required)")
		k := fs.Int("k", 5, "the oracle's attempts per task (1..20)")
		return clientCommand(func(ctx context.Context, c *apiClient, pos []string) (err error) {
			if *taskset == "" {
				return usagef("--taskset is required: proctor env certify BUILD --taskset NAME")
			}
			if pos[0], err = c.resolveID(ctx, "build", pos[0]); err != nil {
				return err
			}
			tasksetID, err := c.tasksetByName(ctx, *taskset)
			if err != nil {
				return err
			}
			var cert httpapi.Certification
			if err := c.do(ctx, http.MethodPost, "/v2/builds/"+pos[0]+"/certify", map[string]any{"taskset_id": tasksetID, "k": *k}, &cert); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "certification %s of build %s: job %s (the oracle %d×, the idle and random agents and the tamper probe once, per task)\n", cert.ID, pos[0], cert.JobID, *k)
			if _, err := c.follow(ctx, cert.JobID.String(), stderr); err != nil {
				return err
			}
			err = awaitRecorded(ctx, c, "/v2/builds/"+pos[0]+"/certification", &cert, func(c *httpapi.Certification) (uuid.UUID, string) { return c.ID, c.Status },
				"certification", "certify/"+cert.ID.String())
			if err != nil {
				return err
			}
			return printCertification(stdout, cert)
		})(fs)
	}
}

// recordWithin bounds the wait for a certification's or a replay check's figures once its job
// has ended.
const recordWithin = 2 * time.Minute

// awaitRecorded waits for what a check (a certification, a replay check) found to be recorded,
// a moment after its job's last attempt ended: it reads path into out until out's status is no
// longer running. state reads out's id and status; another id at path means a newer check of the
// build started since.
func awaitRecorded[T any](ctx context.Context, c *apiClient, path string, out *T, state func(*T) (uuid.UUID, string), what, workflowID string) error {
	id, status := state(out)
	for deadline := time.Now().Add(recordWithin); status == "running"; {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s: its job has ended, and its figures were not recorded within %s (its workflow is %s)", what, id, recordWithin, workflowID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if err := c.do(ctx, http.MethodGet, path, nil, out); err != nil {
			return err
		}
		var now uuid.UUID
		if now, status = state(out); now != id {
			return fmt.Errorf("another %s (%s) started since this one (%s): read it with GET %s", what, now, id, path)
		}
	}
	return nil
}

// printCertification prints a certification's figures per task; an error when it did not pass.
func printCertification(stdout io.Writer, cert httpapi.Certification) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tORACLE\tIDLE\tRANDOM\tTAMPER\tFLAGS")
	for _, t := range cert.Tasks {
		tamper := "–"
		if p := t.Tamper; p != nil {
			tamper = fmt.Sprintf("%d/%d refused", len(p.Refused), len(p.Tried))
			if len(p.Claimed) > 0 {
				tamper += fmt.Sprintf("; claimed success via %s → %s", strings.Join(p.Claimed, ", "), fmtReward(&p.Reward))
			}
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%s\t%s\n", t.TaskName, t.OraclePasses, t.OracleRuns, fmtReward(t.IdleReward), fmtReward(t.RandomReward),
			tamper, orDash(strings.Join(t.Flags, ", ")))
	}
	tw.Flush()
	if su := cert.Startup; su.P50MS != nil {
		fmt.Fprintf(stdout, "environment start-up (try start → MCP ready): p50 %.0f ms, p99 %.0f ms over %d attempts\n", *su.P50MS, *su.P99MS, su.Samples)
	}
	for _, su := range cert.StartupByProvider {
		if su.P50MS != nil {
			fmt.Fprintf(stdout, "  on %s sandboxes: p50 %.0f ms, p99 %.0f ms over %d attempts\n", cmp.Or(su.Provider, "unrecorded"), *su.P50MS, *su.P99MS, su.Samples)
		}
	}
	if cert.Status != "passed" {
		return fmt.Errorf("certification %s of %s: %s", cert.ID, cert.BuildDigest, cert.Status)
	}
	fmt.Fprintf(stdout, "certification %s of %s: passed\n", cert.ID, cert.BuildDigest)
	return nil
}
