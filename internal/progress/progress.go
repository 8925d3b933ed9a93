// Package progress draws the progress bars of the long-running commands (export, republish,
// rebuilds and verifications) the same way: events done of a total, events/s, elapsed time.
package progress

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Bar returns a progress bar of total events labelled label, writing to w (at most every 200ms)
// and ending its line when it completes.
func Bar(w io.Writer, total int64, label string) *progressbar.ProgressBar {
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
