package httpapi

import (
	"regexp"

	"github.com/proctorhq/proctor/models/rollouts"
)

// hostPath is an absolute path of two or more segments, as worker logs and errors show them: a
// sandbox's directory, an environment's binary, the worker's data dir.
var hostPath = regexp.MustCompile(`(?:/[A-Za-z0-9._@+=~-]+){2,}/?`)

// forReader is what a reader of the trace may see of text a worker wrote (its log lines, the
// trace's error): the trace's own team sees it whole; anyone else, reading a published trace,
// sees host paths cut to their last segment, so that a worker's layout is not published.
func forReader(t *rollouts.TraceRow, text string) string {
	if t.CanEdit {
		return text
	}
	return redactHostPaths(text)
}

// redactHostPaths cuts every absolute path in s to "…/" and its last segment.
func redactHostPaths(s string) string {
	return hostPath.ReplaceAllStringFunc(s, func(p string) string {
		trimmed := p
		if trimmed[len(trimmed)-1] == '/' {
			trimmed = trimmed[:len(trimmed)-1]
		}
		for i := len(trimmed) - 1; i >= 0; i-- {
			if trimmed[i] == '/' {
				return "…" + trimmed[i:]
			}
		}
		return p
	})
}
