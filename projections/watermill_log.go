package projections

import (
	"context"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill"
)

// watermillLogger adapts log for watermill, which logs every message it handles at trace level:
// a record the handler would drop is never built, because building its fields cost a few percent
// of a busy node's CPU. Watermill's info records are logged at debug level.
type watermillLogger struct {
	next watermill.LoggerAdapter
	log  *slog.Logger
}

func newWatermillLogger(log *slog.Logger) watermillLogger {
	return watermillLogger{
		next: watermill.NewSlogLoggerWithLevelMapping(log, map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug}),
		log:  log,
	}
}

func (l watermillLogger) enabled(level slog.Level) bool {
	return l.log.Enabled(context.Background(), level)
}

func (l watermillLogger) Error(msg string, err error, fields watermill.LogFields) {
	if l.enabled(slog.LevelError) {
		l.next.Error(msg, err, fields)
	}
}

func (l watermillLogger) Info(msg string, fields watermill.LogFields) {
	if l.enabled(slog.LevelDebug) {
		l.next.Info(msg, fields)
	}
}

func (l watermillLogger) Debug(msg string, fields watermill.LogFields) {
	if l.enabled(slog.LevelDebug) {
		l.next.Debug(msg, fields)
	}
}

func (l watermillLogger) Trace(msg string, fields watermill.LogFields) {
	if l.enabled(watermill.LevelTrace) {
		l.next.Trace(msg, fields)
	}
}

func (l watermillLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return watermillLogger{next: l.next.With(fields), log: l.log}
}
