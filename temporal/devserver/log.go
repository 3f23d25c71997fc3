package devserver

import (
	"context"
	"log/slog"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// slogLogger adapts the server's tag-based logger interface to slog, dropping records below level.
type slogLogger struct {
	log   *slog.Logger
	level slog.Level
}

var _ log.Logger = slogLogger{}

func newLogger(l *slog.Logger, level slog.Level) slogLogger { return slogLogger{log: l, level: level} }

func (s slogLogger) Debug(msg string, tags ...tag.Tag)  { s.emit(slog.LevelDebug, msg, tags) }
func (s slogLogger) Info(msg string, tags ...tag.Tag)   { s.emit(slog.LevelInfo, msg, tags) }
func (s slogLogger) Warn(msg string, tags ...tag.Tag)   { s.emit(slog.LevelWarn, msg, tags) }
func (s slogLogger) Error(msg string, tags ...tag.Tag)  { s.emit(slog.LevelError, msg, tags) }
func (s slogLogger) DPanic(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }
func (s slogLogger) Panic(msg string, tags ...tag.Tag)  { s.emit(slog.LevelError, msg, tags) }
func (s slogLogger) Fatal(msg string, tags ...tag.Tag)  { s.emit(slog.LevelError, msg, tags) }

func (s slogLogger) With(tags ...tag.Tag) log.Logger {
	return slogLogger{log: s.log.With(attrs(tags)...), level: s.level}
}

func (s slogLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if level < s.level || !s.log.Enabled(context.Background(), level) {
		return
	}
	s.log.Log(context.Background(), level, msg, attrs(tags)...)
}

func attrs(tags []tag.Tag) []any {
	out := make([]any, 0, len(tags))
	for _, t := range tags {
		out = append(out, slog.Any(t.Key(), t.Value()))
	}
	return out
}
