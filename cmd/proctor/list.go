package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// listCommand is the skeleton the list commands share: --limit and --json (and flags of the
// command's own), one GET of a /v2 list route ({items, total}), then the page as the API answered
// it with --json, else a table of a row per item and, when the page is not all there is, a line
// that says so.
type listCommand[T any] struct {
	path       string // the route, without its query
	limit      int    // --limit's default
	limitUsage string // --limit's help
	// flags, when set, defines the command's own flags; what it returns adds their query
	// parameters.
	flags   func(fs *flag.FlagSet) func(q url.Values)
	columns []string      // the table's header
	row     func(T) []any // an item's cells, in the columns' order
	// complete, when set, reads for an item what the list route does not carry; --json then
	// prints the page as completed ({items, total}) instead of as the API answered it.
	complete func(ctx context.Context, c *apiClient, item *T) error
}

// listPage is a page of a /v2 list route.
type listPage[T any] struct {
	Items []T `json:"items"`
	Total int `json:"total"`
}

// body is the command's flags body (see withFlags).
func (l listCommand[T]) body(stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		query := func(url.Values) {}
		if l.flags != nil {
			query = l.flags(fs)
		}
		limit := fs.Int("limit", l.limit, l.limitUsage)
		return jsonClientCommand(func(ctx context.Context, c *apiClient, _ []string, asJSON bool) error {
			q := url.Values{"limit": {fmt.Sprint(*limit)}}
			query(q)
			return l.print(ctx, c, l.path+"?"+q.Encode(), asJSON, stdout)
		})(fs)
	}
}

// print reads the page at path and prints it.
func (l listCommand[T]) print(ctx context.Context, c *apiClient, path string, asJSON bool, stdout io.Writer) error {
	if asJSON && l.complete == nil {
		return printRaw(ctx, c, path, stdout)
	}
	var page listPage[T]
	if err := c.do(ctx, http.MethodGet, path, nil, &page); err != nil {
		return err
	}
	if l.complete != nil {
		for i := range page.Items {
			if err := l.complete(ctx, c, &page.Items[i]); err != nil {
				return err
			}
		}
	}
	if asJSON {
		return writeJSON(stdout, page)
	}
	tw := newTable(stdout, l.columns...)
	for _, item := range page.Items {
		cells := l.row(item)
		text := make([]string, len(cells))
		for i, cell := range cells {
			text[i] = fmt.Sprint(cell)
		}
		fmt.Fprintln(tw, strings.Join(text, "\t"))
	}
	tw.Flush()
	if page.Total > len(page.Items) {
		fmt.Fprintf(stdout, "(%d of %d; --limit shows more)\n", len(page.Items), page.Total)
	}
	return nil
}

// searchFlag adds --search to a list command: only names that contain it.
func searchFlag(fs *flag.FlagSet) func(q url.Values) {
	search := fs.String("search", "", "only names containing this (case-insensitive)")
	return func(q url.Values) {
		if *search != "" {
			q.Set("search", *search)
		}
	}
}
