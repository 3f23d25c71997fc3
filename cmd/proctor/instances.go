package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// cmdInstances lists an environment's sandboxes (running ones; every one with --all), or stops
// some with --stop.
func cmdInstances(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		all := fs.Bool("all", false, "include terminated instances")
		stop := fs.String("stop", "", "comma-separated instance ids to stop (their attempts end cancelled)")
		limit := fs.Int("limit", 50, "how many to list (1 to 500)")
		asJSON := jsonFlag(fs)
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			registry, err := c.findEnvironment(ctx, pos[0])
			if err != nil {
				return err
			}
			if *stop != "" {
				var res struct {
					Stopped int      `json:"stopped"`
					Errors  []string `json:"errors"`
				}
				ids := strings.Split(*stop, ",")
				if err := c.do(ctx, http.MethodPost, "/v2/instance/stop", map[string]any{"registry_id": registry, "instance_ids": ids}, &res); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "stopping %d of %d instances\n", res.Stopped, len(ids))
				for _, e := range res.Errors {
					fmt.Fprintln(stdout, "  not stopped:", e)
				}
				return nil
			}
			q := url.Values{"registry_id": {registry}, "limit": {fmt.Sprint(*limit)}, "include_terminated": {fmt.Sprint(*all)}}
			var res struct {
				Instances []struct {
					ID            string    `json:"id"`
					Status        string    `json:"status"`
					TraceID       string    `json:"trace_id"`
					Attempt       int       `json:"attempt"`
					CreatedAt     time.Time `json:"created_at"`
					DurationHours float64   `json:"duration_hours"`
					HourlyRate    float64   `json:"hourly_rate"`
					Cost          float64   `json:"actual_cost"`
				} `json:"instances"`
				Total        int `json:"total"`
				RunningCount int `json:"running_count"`
			}
			if *asJSON {
				return printRaw(ctx, c, "/v2/instance?"+q.Encode(), stdout)
			}
			if err := c.do(ctx, http.MethodGet, "/v2/instance?"+q.Encode(), nil, &res); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%d running", res.RunningCount)
			if *all {
				fmt.Fprintf(stdout, ", %d in all", res.Total)
			}
			fmt.Fprintln(stdout)
			if len(res.Instances) == 0 {
				return nil
			}
			tw := newTable(stdout, "INSTANCE", "STATUS", "TRACE", "TRY", "STARTED", "MINUTES", "USD/H", "COST")
			for _, in := range res.Instances {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%.1f\t%.4f\t$%.4f\n", in.ID, in.Status, in.TraceID, in.Attempt,
					in.CreatedAt.Local().Format("2006-01-02 15:04:05"), in.DurationHours*60, in.HourlyRate, in.Cost)
			}
			return tw.Flush()
		}
	}
}

// findEnvironment resolves an environment of the caller's team by id or exact name.
func (c *apiClient) findEnvironment(ctx context.Context, nameOrID string) (string, error) {
	r, err := c.ownEnvironment(ctx, nameOrID)
	if err != nil {
		return "", err
	}
	if r != nil {
		return r.ID, nil
	}
	var one struct {
		ID string `json:"id"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/registry/"+url.PathEscape(nameOrID), nil, &one); err == nil && one.ID != "" {
		return one.ID, nil
	}
	return "", errors.New("no environment of your team is named " + nameOrID)
}

// ownEnvironment is the environment of the caller's team whose name (or id) is nameOrID, as the
// registry lists it; nil when the team has none.
func (c *apiClient) ownEnvironment(ctx context.Context, nameOrID string) (*environmentRow, error) {
	var page struct {
		Items []environmentRow `json:"items"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/registry?owner_only=true&limit=500&search="+url.QueryEscape(nameOrID), nil, &page); err != nil {
		return nil, err
	}
	for _, r := range page.Items {
		if r.Name == nameOrID || r.ID == nameOrID {
			return &r, nil
		}
	}
	return nil, nil
}
