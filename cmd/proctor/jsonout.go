package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
)

// jsonFlag adds --json to a list or show command: the command then prints what it read as one
// JSON document, with the API's field names, instead of a table and hints, for scripts and jq.
func jsonFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("json", false, "print JSON (the API's field names) instead of a table")
}

// writeJSON prints v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printRaw prints the API's answer to GET path as it came, indented.
func printRaw(ctx context.Context, c *apiClient, path string, stdout io.Writer) error {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, path, nil, &raw); err != nil {
		return err
	}
	return writeJSON(stdout, raw)
}
