package projections

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
)

func TestWatermillLoggerKeepsLevels(t *testing.T) {
	var buf bytes.Buffer
	level := new(slog.LevelVar)
	level.Set(slog.LevelInfo)
	l := newWatermillLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))).
		With(watermill.LogFields{"consumer_group": "g"})

	l.Trace("trace record", watermill.LogFields{"k": 1})
	l.Debug("debug record", nil)
	l.Info("info record", nil)
	l.Error("error record", errors.New("boom"), watermill.LogFields{"k": 2})
	out := buf.String()
	for _, dropped := range []string{"trace record", "debug record", "info record"} {
		if strings.Contains(out, dropped) {
			t.Errorf("at info level the log has %q:\n%s", dropped, out)
		}
	}
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "error=boom") || !strings.Contains(out, "consumer_group=g") {
		t.Errorf("error record missing or without its fields:\n%s", out)
	}

	buf.Reset()
	level.Set(watermill.LevelTrace)
	l.Trace("trace record", nil)
	l.Info("info record", nil)
	out = buf.String()
	if !strings.Contains(out, "trace record") {
		t.Errorf("at trace level the trace record is missing:\n%s", out)
	}
	if !strings.Contains(out, `level=DEBUG msg="info record"`) {
		t.Errorf("watermill's info records are not logged at debug level:\n%s", out)
	}
}
