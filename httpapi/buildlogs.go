package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/registry"
)

// registerBuildLogs registers the read of a build's log (a Proctor extension).
func (s *Server) registerBuildLogs() {
	tags := []string{"Builds"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-build-logs", Method: http.MethodGet, Path: "/builds/{build_id}/logs", Tags: tags, Summary: "Follow a build's log",
		Description: "A Proctor extension (not in the platform spec): the build's log lines after `after_seq`, oldest first. " +
			"Follow a build by asking again with `after_seq` set to the last `seq` seen until `done` is true " +
			"(the build has ended and every line has been read).",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getBuildLogs)
}

type buildLogsInput struct {
	BuildID  uuid.UUID `path:"build_id"`
	AfterSeq int       `query:"after_seq" default:"-1" minimum:"-1" maximum:"2147483647" doc:"return lines after this seq; -1 from the first"`
	Limit    int       `query:"limit" default:"500" minimum:"1" maximum:"5000"`
}

// BuildLogLine is one line of a build's log.
type BuildLogLine struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	Line string    `json:"line"`
}

// BuildLogs is a page of a build's log.
type BuildLogs struct {
	BuildID uuid.UUID      `json:"build_id"`
	Status  string         `json:"status" doc:"the build's status when the page was read"`
	Logs    []BuildLogLine `json:"logs"`
	HasMore bool           `json:"has_more" doc:"more lines are stored after this page"`
	Done    bool           `json:"done" doc:"the build had ended before this page was read, and the page holds its last line"`
}

type buildLogsOutput struct{ Body *BuildLogs }

// getBuildLogs serves GET /v2/builds/{build_id}/logs: a page of a build's log.
func (s *Server) getBuildLogs(ctx context.Context, in *buildLogsInput) (*buildLogsOutput, error) {
	b, err := s.registry.GetBuildFor(ctx, callerFrom(ctx), in.BuildID)
	if err != nil {
		return nil, storeError(err, "build")
	}
	// The status is read before the lines: a build that had ended has written its whole log.
	lines, err := s.registry.BuildLogs(ctx, b.ID, in.AfterSeq, in.Limit+1)
	if err != nil {
		return nil, err
	}
	out := &BuildLogs{BuildID: b.ID, Status: b.Status, Logs: make([]BuildLogLine, 0, len(lines)), HasMore: len(lines) > in.Limit}
	for _, l := range lines[:min(len(lines), in.Limit)] {
		out.Logs = append(out.Logs, BuildLogLine{Seq: l.Seq, Time: l.Time, Line: l.Line})
	}
	out.Done = registry.BuildTerminal(b.Status) && !out.HasMore
	return &buildLogsOutput{Body: out}, nil
}
