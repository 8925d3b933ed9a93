package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/imledger/imledger/projections"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat (100 on Linux).
const clockTicks = 100

// benchStore is a store bench ws charges besides the server, by process name.
type benchStore struct {
	label string
	comms []string
}

// benchStores are the processes bench ws charges besides the server.
var benchStores = []benchStore{
	{"postgres", []string{"postgres"}},
	{"mariadb", []string{"mariadbd", "mysqld"}},
	{"redis", []string{"redis-server"}},
}

// cpuSample is the CPU seconds (user and system) each watched process had used when sampled.
// A store's figure sums every process of that name, with the children they reaped (a closed
// PostgreSQL backend's time moves to the postmaster), so it only grows.
type cpuSample map[string]float64

// sampleCPU reads /proc: the server's own CPU time (pid 0: none) under serverLabel and each
// store's, by process name or, for a store named in roots, by the process tree of that pid
// (the store of this bench alone, where the machine runs other instances of it). Processes that
// vanish while read are skipped.
func sampleCPU(serverPID int, serverLabel string, roots map[string]int) cpuSample {
	out := cpuSample{}
	if serverPID != 0 {
		if _, t, err := procCPU(serverPID); err == nil {
			out[serverLabel] = t.own
		}
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	procs := map[int]procInfo{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == serverPID {
			continue
		}
		comm, t, err := procCPU(pid)
		if err != nil {
			continue
		}
		procs[pid] = procInfo{comm: comm, times: t}
	}
	for pid, p := range procs {
		for _, s := range benchStores {
			if root, ok := roots[s.label]; ok {
				if descends(procs, pid, root) {
					out[s.label] += p.times.own + p.times.children
				}
				continue
			}
			for _, c := range s.comms {
				if p.comm == c {
					out[s.label] += p.times.own + p.times.children
				}
			}
		}
	}
	return out
}

type procInfo struct {
	comm  string
	times procTimes
}

// descends reports whether pid is root or one of its descendants among procs.
func descends(procs map[int]procInfo, pid, root int) bool {
	for range 64 { // a bound on the depth, should /proc be read mid-change
		if pid == root {
			return true
		}
		p, ok := procs[pid]
		if !ok || p.times.ppid <= 1 {
			return false
		}
		pid = p.times.ppid
	}
	return false
}

type procTimes struct {
	own, children float64
	ppid          int
}

// procCPU reads a process's name, parent and CPU seconds from /proc/<pid>/stat.
func procCPU(pid int) (comm string, t procTimes, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", t, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", t, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	comm = s[open+1 : end]
	f := strings.Fields(s[end+1:])
	if len(f) < 15 {
		return "", t, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ppid, err := strconv.Atoi(f[1]) // field 4
	if err != nil {
		return "", t, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	var v [4]float64
	for i := range v { // utime, stime, cutime, cstime: fields 14-17
		n, err := strconv.ParseInt(f[11+i], 10, 64)
		if err != nil {
			return "", t, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		v[i] = float64(n) / clockTicks
	}
	return comm, procTimes{own: v[0] + v[1], children: v[2] + v[3], ppid: ppid}, nil
}

// windowCatchUp measures what a bench ws window cost every process, and what the projections' catch-up
// after it cost: CPU samples at the window's start and end and once the projectors have no lag,
// the lag at the window's end and how long it took to reach zero.
type windowCatchUp struct {
	serverPID   int
	serverLabel string
	storeRoots  map[string]int                                        // store label → the pid whose process tree is that store
	lag         func(context.Context) ([]projections.GroupLag, error) // nil: no projectors to wait for
	wait        time.Duration

	start, windowEnd, drained cpuSample
	endAt                     time.Time
	endLag                    chan lagResult
	drainTook                 time.Duration
	drainErr                  error
}

type lagResult struct {
	lags []projections.GroupLag
	err  error
}

// monitor wraps a bench monitor (nil: none): it samples the CPU when the window starts and ends,
// and starts measuring the lag at the end without holding up the drain of acks.
func (c *windowCatchUp) monitor(inner func(context.Context)) func(context.Context) {
	return func(ctx context.Context) {
		c.start = sampleCPU(c.serverPID, c.serverLabel, c.storeRoots)
		if inner != nil {
			inner(ctx)
		} else {
			<-ctx.Done()
		}
		c.windowEnd, c.endAt = sampleCPU(c.serverPID, c.serverLabel, c.storeRoots), time.Now()
		c.endLag = make(chan lagResult, 1)
		if c.lag == nil {
			return
		}
		go func() {
			lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			lags, err := c.lag(lctx)
			c.endLag <- lagResult{lags, err}
		}()
	}
}

// finish waits until every projector's lag is zero (at most c.wait), then samples the CPU again.
func (c *windowCatchUp) finish(ctx context.Context) {
	if c.endAt.IsZero() {
		return
	}
	if c.lag != nil {
		deadline := time.Now().Add(c.wait)
		for {
			lags, err := c.lag(ctx)
			if err == nil && totalLag(lags) == 0 {
				c.drainTook = time.Since(c.endAt)
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				c.drainErr = fmt.Errorf("projectors still behind after %s: %s", c.wait, describeLag(lags, err))
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	c.drained = sampleCPU(c.serverPID, c.serverLabel, c.storeRoots)
}

// describeLag names the groups and partitions that are behind.
func describeLag(lags []projections.GroupLag, err error) string {
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, l := range lags {
		if l.Events == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d events %v", l.ConsumerGroup, l.Events, l.Partitions))
	}
	return strings.Join(parts, "; ")
}

func totalLag(lags []projections.GroupLag) int64 {
	var n int64
	for _, l := range lags {
		n += l.Events
	}
	return n
}

// print writes the lag at the window's end, the time to drain it, and CPU seconds per 1,000
// acked messages of each process over the window alone and including the catch-up.
func (c *windowCatchUp) print(w io.Writer, acked int64) error {
	if c.endAt.IsZero() {
		return nil
	}
	var b strings.Builder
	if c.lag != nil {
		r := <-c.endLag
		if r.err != nil {
			fmt.Fprintf(&b, "projector lag at the end of the window: not measured: %v\n", r.err)
		} else {
			parts := make([]string, 0, len(r.lags))
			for _, l := range r.lags {
				parts = append(parts, fmt.Sprintf("%s %d", l.ConsumerGroup, l.Events))
			}
			fmt.Fprintf(&b, "projector lag at the end of the window (events, from committed offsets): %s\n", strings.Join(parts, ", "))
		}
		if c.drainErr != nil {
			fmt.Fprintf(&b, "read models drained: %v\n", c.drainErr)
		} else {
			fmt.Fprintf(&b, "read models drained (every projector at lag 0) %.1f s after the end of the window\n", c.drainTook.Seconds())
		}
	}
	if acked > 0 {
		per := func(a, z cpuSample, label string) float64 { return (z[label] - a[label]) * 1000 / float64(acked) }
		labels := []string{}
		if c.serverPID != 0 {
			labels = append(labels, c.serverLabel)
		}
		for _, s := range benchStores {
			labels = append(labels, s.label)
		}
		fmt.Fprintf(&b, "CPU seconds per 1,000 acked messages (%d acked): window only / including the catch-up\n", acked)
		var allW, allC float64
		for _, l := range labels {
			wv, cv := per(c.start, c.windowEnd, l), per(c.start, c.drained, l)
			allW, allC = allW+wv, allC+cv
			fmt.Fprintf(&b, "  %-32s %.3f / %.3f\n", l, wv, cv)
		}
		fmt.Fprintf(&b, "  %-32s %.3f / %.3f\n", "all", allW, allC)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
