package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/google/uuid"
)

// idPrefix is what a command taking an id accepts: a whole UUID, or its first characters (at
// least 4), hyphens included or not.
var idPrefix = regexp.MustCompile(`^[0-9a-fA-F-]{4,36}$`)

// traceSearchJobs bounds a trace prefix's search: the traces of this many of the team's newest
// jobs. A trace id lists no job, and no route finds traces by prefix.
const traceSearchJobs = 50

// resolveID turns a command's id argument into the whole id of the kind ("job", "trace" or
// "build") that starts with it, among what the caller's team can list. A whole UUID is taken as
// it is, unchecked: the command's own request says whether it exists.
func (c *apiClient) resolveID(ctx context.Context, kind, arg string) (string, error) {
	if _, err := uuid.Parse(arg); err == nil {
		return arg, nil
	}
	prefix := strings.ToLower(strings.ReplaceAll(arg, "-", ""))
	var matches []string
	match := func(id string) {
		if strings.HasPrefix(strings.ReplaceAll(id, "-", ""), prefix) {
			matches = append(matches, id)
		}
	}
	type row struct {
		ID string `json:"id"`
	}
	where := ""
	switch kind {
	case "job":
		jobs, err := allItems[row](ctx, c, "/v2/jobs")
		if err != nil {
			return "", err
		}
		for _, j := range jobs {
			match(j.ID)
		}
		where = "your team's jobs"
	case "trace":
		var page struct {
			Items []row `json:"items"`
		}
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/jobs?limit=%d", traceSearchJobs), nil, &page); err != nil {
			return "", err
		}
		for _, j := range page.Items {
			traces, err := allItems[row](ctx, c, "/v2/jobs/"+url.PathEscape(j.ID)+"/traces")
			if err != nil {
				return "", err
			}
			for _, t := range traces {
				match(t.ID)
			}
		}
		where = fmt.Sprintf("the attempts of your team's %d newest jobs", traceSearchJobs)
	case "build":
		regs, err := allItems[row](ctx, c, "/v2/registry")
		if err != nil {
			return "", err
		}
		for _, r := range regs {
			var builds struct {
				Builds []row `json:"builds"`
			}
			if err := c.do(ctx, http.MethodGet, "/v2/builds?limit=500&registry_id="+url.QueryEscape(r.ID), nil, &builds); err != nil {
				return "", err
			}
			for _, b := range builds.Builds {
				match(b.ID)
			}
		}
		where = "the builds of your team's environments"
	default:
		return "", fmt.Errorf("resolve an id: unknown kind %q", kind)
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return "", fmt.Errorf("no %s id among %s starts with %q: give the whole id", kind, where, arg)
	}
	shown := matches
	if len(shown) > 5 {
		shown = shown[:5]
	}
	return "", fmt.Errorf("%q is the start of %d %s ids (%s%s): give more of it", arg, len(matches), kind, strings.Join(shown, ", "), map[bool]string{true: ", …"}[len(matches) > 5])
}
