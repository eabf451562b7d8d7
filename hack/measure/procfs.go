package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat. Linux fixes it
// at 100 for user space on every architecture Lambda runs (x86_64, arm64);
// reading it properly needs sysconf, which a CGO_ENABLED=0 build lacks.
const userHZ = 100

// cpuSample is a process's CPU time so far, from two sources: the
// scheduler's per-thread run time (nanoseconds, exact) and utime+stime
// (clock ticks, what `time` and `ps` report). The per-thread sum loses the
// time of threads that have exited; the Go runtime rarely ends a thread, and
// comparing the two catches it when it does.
type cpuSample struct {
	sched time.Duration // sum of /proc/<pid>/task/*/schedstat run times
	ticks time.Duration // utime+stime of /proc/<pid>/stat
}

// since returns the CPU time between earlier and s: the exact figure,
// unless threads that ended made it lose more than two clock ticks against
// the coarse one.
func (s cpuSample) since(earlier cpuSample) time.Duration {
	sched, ticks := s.sched-earlier.sched, s.ticks-earlier.ticks
	if sched < 0 || ticks-sched > 2*time.Second/userHZ {
		return ticks
	}
	return sched
}

// readCPU samples a process's CPU time.
func readCPU(pid int) (cpuSample, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return cpuSample{}, fmt.Errorf("read cpu time of pid %d: %w", pid, err)
	}
	ticks, err := parseStatCPU(stat)
	if err != nil {
		return cpuSample{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	if err != nil {
		return cpuSample{}, fmt.Errorf("list threads of pid %d: %w", pid, err)
	}
	var sched time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended while we looked
		}
		if err != nil {
			return cpuSample{}, fmt.Errorf("read thread cpu time of pid %d: %w", pid, err)
		}
		ns, err := parseSchedstat(b)
		if err != nil {
			return cpuSample{}, fmt.Errorf("pid %d: %w", pid, err)
		}
		sched += ns
	}
	return cpuSample{sched: sched, ticks: ticks}, nil
}

// parseStatCPU returns utime+stime from the contents of /proc/<pid>/stat.
// The command name (field 2) is in parentheses and may hold spaces or
// parentheses itself, so fields are counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, errors.New("malformed /proc stat: no ')'")
	}
	// After ") " come field 3 (state) onwards; utime and stime are fields
	// 14 and 15.
	fields := strings.Fields(string(stat[end+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("malformed /proc stat: %d fields after the command", len(fields))
	}
	var total int64
	for _, i := range []int{utime, stime} {
		v, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc stat field %d: %w", i+3, err)
		}
		total += v
	}
	return time.Duration(total) * time.Second / userHZ, nil
}

// parseSchedstat returns the run time (first field, nanoseconds) of
// /proc/<pid>/task/<tid>/schedstat.
func parseSchedstat(b []byte) (time.Duration, error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("empty schedstat")
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed schedstat: %w", err)
	}
	return time.Duration(ns), nil
}

// readHWM returns the process's peak resident set size (VmHWM) in bytes.
func readHWM(pid int) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	v, err := parseStatusKB(b, "VmHWM")
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return v, nil
}

// parseStatusKB returns a "Key:   N kB" line of /proc/<pid>/status in bytes.
func parseStatusKB(status []byte, key string) (int64, error) {
	for line := range strings.Lines(string(status)) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != key {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("malformed %s line %q", key, strings.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed %s line: %w", key, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s line", key)
}

// resetHWM lowers the process's VmHWM to its current resident size, so the
// next reading is the peak since now (proc(5), clear_refs value 5).
func resetHWM(pid int) error {
	if err := os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak memory of pid %d: %w", pid, err)
	}
	return nil
}
