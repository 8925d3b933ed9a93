package wsbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProcessSample is what Linux reports about a process at one moment.
type ProcessSample struct {
	At  time.Time
	RSS int64         // resident set size (VmRSS), bytes
	HWM int64         // peak resident set size so far (VmHWM), bytes
	CPU time.Duration // user plus system CPU time used so far
}

// clockTicks is Linux's USER_HZ, the unit of the CPU times in /proc/<pid>/stat; it is 100 on
// every architecture Go supports.
const clockTicks = 100

// SampleProcess reads /proc/<pid>/status and /proc/<pid>/stat. It fails where there is no /proc
// (not Linux) or no such process.
func SampleProcess(pid int) (ProcessSample, error) {
	s := ProcessSample{At: time.Now()}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("sample process %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return s, fmt.Errorf("sample process %d: %s: %w", pid, name, err)
		}
		if name == "VmRSS" {
			s.RSS = kb << 10
		} else {
			s.HWM = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("sample process %d: %w", pid, err)
	}
	// The command name, field 2, may hold spaces: count fields after its closing parenthesis.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, fmt.Errorf("sample process %d: malformed stat", pid)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return s, fmt.Errorf("sample process %d: malformed stat", pid)
	}
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return s, fmt.Errorf("sample process %d: cpu time: %w", pid, err)
		}
		ticks += n
	}
	s.CPU = time.Duration(ticks) * time.Second / clockTicks
	return s, nil
}

// LoadAverage returns the first three fields of /proc/loadavg ("1.20 1.50 3.52"), or "" where
// there is none.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// ProcessMonitor samples a process (the node under load) and the machine's load average once a
// second while Run runs; use Run as Options.Monitor. Report summarizes the samples. It is safe
// for concurrent use.
type ProcessMonitor struct {
	PID   int
	Label string // names the process in the report, e.g. "server"

	mu              sync.Mutex
	first, last     ProcessSample
	peak            int64
	loadAt, loadEnd string
	err             error
}

// Run samples until ctx ends, and once more then.
func (m *ProcessMonitor) Run(ctx context.Context) {
	m.sample(true)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.sample(false)
			return
		case <-t.C:
			m.sample(false)
		}
	}
}

func (m *ProcessMonitor) sample(first bool) {
	s, err := SampleProcess(m.PID)
	load := LoadAverage()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.err = err
		return
	}
	if first {
		m.first, m.loadAt = s, load
	}
	m.last, m.loadEnd = s, load
	m.peak = max(m.peak, s.RSS, s.HWM)
}

// ErrNoSamples is returned by Report when the monitor never ran.
var ErrNoSamples = errors.New("wsbench: the process was never sampled")

// Report writes the process's RSS at the end of the window, its peak RSS and the CPU it used in
// the window (100% is one core).
func (m *ProcessMonitor) Report(w io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.first.At.IsZero() {
		return errors.Join(ErrNoSamples, m.err)
	}
	const mib = 1 << 20
	cpu := 0.0
	wall := m.last.At.Sub(m.first.At)
	if wall > 0 {
		cpu = 100 * float64(m.last.CPU-m.first.CPU) / float64(wall)
	}
	_, err := fmt.Fprintf(w, "%s pid %d: rss %.1f MiB at the end, peak %.1f MiB; cpu %.0f%% of one core over %s\n",
		m.Label, m.PID, float64(m.last.RSS)/mib, float64(m.peak)/mib, cpu, wall.Round(time.Second))
	return err
}

// Load returns the machine's load average when Run started and when it last sampled.
func (m *ProcessMonitor) Load() (start, end string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.loadAt, m.loadEnd
}
