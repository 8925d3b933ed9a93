package main

import (
	"io"

	"github.com/imledger/imledger/internal/progress"
	"github.com/imledger/imledger/replay"
)

// progressBars reports the passes of rebuilds and verifications as progress bars (events,
// events/s) on w, one per pass.
func progressBars(w io.Writer) replay.Progress {
	return func(label string, total int64) replay.ProgressTracker {
		return progress.Bar(w, total, label)
	}
}
