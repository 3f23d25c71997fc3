package envserver

import (
	"context"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const loggerKey ctxKey = 100

func withLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey, l)
}

// Progress reports how far the tool call that ctx belongs to has come, as an MCP progress
// notification to the client, when the client asked for progress (its request carried a
// progress token); otherwise, and outside a tool call, it does nothing. total may be 0 when
// unknown.
func Progress(ctx context.Context, progress, total float64, message string) error {
	req := CallRequest(ctx)
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	return req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total, Message: message})
}

// Logger is a logger for the tool call that ctx belongs to: its records go to the server's
// logger (stderr by default, see [WithLogger]) and, at or above the level the client chose with
// logging/setLevel (none until it chooses), to the client as MCP log notifications named after
// the tool. Outside a tool call it is the server's logger (or slog's default).
func Logger(ctx context.Context) *slog.Logger {
	base, _ := ctx.Value(loggerKey).(*slog.Logger)
	if base == nil {
		base = slog.Default()
	}
	req := CallRequest(ctx)
	if req == nil || req.Session == nil {
		return base
	}
	name := ""
	if req.Params != nil {
		name = req.Params.Name
	}
	return slog.New(slog.NewMultiHandler(base.Handler(), mcp.NewLoggingHandler(req.Session, &mcp.LoggingHandlerOptions{LoggerName: name})))
}
