package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/models/rollouts"
)

// cmdEnvCheck replays a finished job on a build: each scored attempt of the job run again on the
// build with its model's recorded answers; it follows the replays' job, then prints per attempt
// the reward before and after and the first step whose tool result differs. It fails (exit
// status 1) when an attempt's reward changed or its replay did not finish, as a regression check
// in CI wants; an attempt that only diverged is said.
func cmdEnvCheck(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		against := fs.String("against", "", "the finished job whose attempts are replayed on the build (required)")
		return clientCommand(func(ctx context.Context, c *apiClient, pos []string) (err error) {
			if *against == "" {
				return usagef("--against is required: proctor env check BUILD --against JOB")
			}
			if pos[0], err = c.resolveID(ctx, "build", pos[0]); err != nil {
				return err
			}
			job, err := c.resolveID(ctx, "job", *against)
			if err != nil {
				return err
			}
			var chk httpapi.ReplayCheck
			if err := c.do(ctx, http.MethodPost, "/v2/builds/"+pos[0]+"/check", map[string]any{"against_job_id": job}, &chk); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "replay check %s of build %s against job %s: job %s\n", chk.ID, pos[0], job, chk.JobID)
			if _, err := c.follow(ctx, chk.JobID.String(), stderr); err != nil {
				return err
			}
			err = awaitRecorded(ctx, c, "/v2/builds/"+pos[0]+"/check", &chk, func(c *httpapi.ReplayCheck) (uuid.UUID, string) { return c.ID, c.Status },
				"replay check", "replay-check/"+chk.ID.String())
			if err != nil {
				return err
			}
			return printReplayCheck(stdout, chk)
		})(fs)
	}
}

// printReplayCheck prints a replay check per attempt, and what it left out; an error when an
// attempt's reward changed or its replay did not finish, or the check's job was cancelled. An
// attempt that diverged with the same reward is said, not an error: tool results that carry times
// or ids differ on every run.
func printReplayCheck(stdout io.Writer, chk httpapi.ReplayCheck) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tATTEMPT\tREWARD\tFIRST DIFFERENT STEP\tOUTCOME")
	changed, diverged := 0, 0
	for _, a := range chk.Attempts {
		step := "–"
		if a.FirstDivergingStep != nil {
			step = fmt.Sprint(*a.FirstDivergingStep)
		}
		switch a.Outcome {
		case rollouts.ReplayOutcomeSame:
		case rollouts.ReplayOutcomeDiverged:
			diverged++
		default:
			changed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s → %s\t%s\t%s\n", a.TaskName, a.SourceTraceID.String()[:8], fmtReward(a.RewardBefore), fmtReward(a.RewardAfter), step, a.Outcome)
	}
	tw.Flush()
	for _, n := range chk.NotReplayed {
		fmt.Fprintf(stdout, "not replayed: %s (%s): %s\n", n.TaskName, n.TraceID.String()[:8], n.Reason)
	}
	switch {
	case chk.Status == rollouts.ReplayFailed:
		return fmt.Errorf("replay check %s: failed (its job was cancelled)", chk.ID)
	case changed > 0:
		return fmt.Errorf("replay check %s: %d of %d attempts changed their reward or did not finish on this build (%d more diverged with the same reward)",
			chk.ID, changed, len(chk.Attempts), diverged)
	case diverged > 0:
		fmt.Fprintf(stdout, "replay check %s: every reward the same; %d of %d attempts diverged (a tool result differs)\n", chk.ID, diverged, len(chk.Attempts))
	default:
		fmt.Fprintf(stdout, "replay check %s: all %d attempts the same\n", chk.ID, len(chk.Attempts))
	}
	return nil
}
