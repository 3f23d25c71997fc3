package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proctorhq/proctor/httpapi"
)

// cmdCompare compares two jobs task by task (GET /v2/jobs/compare): the summary with its
// interval and test, then the paired tasks by their difference, flips marked, then what could
// not be paired and why.
func cmdCompare(stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		threshold := fs.Float64("pass-threshold", 1, "the reward at or above which an attempt passes")
		seed := fs.Uint64("seed", 1, "seeds the bootstrap interval")
		return jsonClientCommand(func(ctx context.Context, c *apiClient, pos []string, asJSON bool) (err error) {
			for i := range pos {
				if pos[i], err = c.resolveID(ctx, "job", pos[i]); err != nil {
					return err
				}
			}
			q := url.Values{"a": {pos[0]}, "b": {pos[1]}, "pass_threshold": {strconv.FormatFloat(*threshold, 'g', -1, 64)}, "seed": {strconv.FormatUint(*seed, 10)}}
			var res httpapi.JobComparison
			if err := c.do(ctx, http.MethodGet, "/v2/jobs/compare?"+q.Encode(), nil, &res); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, res)
			}
			return printComparison(stdout, &res)
		})(fs)
	}
}

// jobPairArgs wants two job ids (or their starts).
func jobPairArgs(c *cobra.Command, args []string) error {
	if len(args) != 2 {
		return usageError(c)
	}
	for _, a := range args {
		if !idPrefix.MatchString(a) {
			return usagef("%q is not a job id: job ids are UUIDs, as proctor jobs lists them, or their first characters (at least 4)", a)
		}
	}
	return nil
}

func printComparison(w io.Writer, c *httpapi.JobComparison) error {
	for _, j := range []struct {
		side string
		job  httpapi.ComparedJob
	}{{"a", c.A}, {"b", c.B}} {
		fmt.Fprintf(w, "%s: %s (%s)  %d scored attempts", j.side, cmp.Or(j.job.Name, "unnamed"), j.job.ID, j.job.Scored)
		if j.job.Unscored > 0 {
			fmt.Fprintf(w, ", %d left out (not completed, invalid or unrewarded)", j.job.Unscored)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d paired tasks: mean reward %.3f → %.3f, difference %+.3f (95%% CI %+.3f … %+.3f, paired bootstrap of tasks)\n",
		c.PairedTasks, c.A.Mean, c.B.Mean, c.MeanDifference, c.CI95.Low, c.CI95.High)
	fmt.Fprintf(w, "sign test: b better on %d, a better on %d, %d tied: p = %.4f (exact, two-sided)\n",
		c.SignTest.WinsB, c.SignTest.WinsA, c.SignTest.Ties, c.SignTest.PValue)
	var ks []string
	for i, k := range c.PassAtK {
		ks = append(ks, fmt.Sprintf("pass@%d %.3f → %.3f, pass^%d %.3f → %.3f", k.K, k.A, k.B, k.K, c.PassHatK[i].A, c.PassHatK[i].B))
	}
	fmt.Fprintf(w, "passing at reward ≥ %g: %s\n\n", c.PassThreshold, strings.Join(ks, "; "))
	tw := newTable(w, "TASK", "A MEAN (N)", "B MEAN (N)", "DELTA", "FLIP")
	for _, t := range c.Tasks {
		fmt.Fprintf(tw, "%s\t%.3f (%d)\t%.3f (%d)\t%+.3f\t%s\n", t.TaskName, t.A.Mean, t.A.Attempts, t.B.Mean, t.B.Attempts, t.Delta, t.Flip)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c.Flipped > 0 {
		fmt.Fprintf(w, "\n%d tasks flipped; their traces side by side: proctor compare --json, or the web app's comparison page\n", c.Flipped)
	}
	if len(c.Unpaired) > 0 {
		reasons := map[string]string{"not_run": "not run by the other job", "other_version": "the other job ran another version", "other_build": "the other job ran another environment build"}
		fmt.Fprintf(w, "\nnot paired (%d):\n", len(c.Unpaired))
		for _, u := range c.Unpaired {
			fmt.Fprintf(w, "  %s (in %s): %s\n", u.TaskName, u.Job, reasons[u.Reason])
		}
	}
	return nil
}
