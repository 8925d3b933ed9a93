package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/imledger/imledger/projections"
)

// progressBars reports the passes of rebuilds and verifications as progress bars (events,
// events/s) on w, one per pass.
func progressBars(w io.Writer) projections.Progress {
	return func(label string, total int64) projections.ProgressTracker {
		return progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("events"),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionOnCompletion(func() { _, _ = fmt.Fprintln(w) }),
		)
	}
}
