package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// tempPrefix names the bed's temporary directories, so leftovers of a
	// killed run are recognisable (and swept by the next Start).
	tempPrefix = "nodetide-testbed-"
	// ownerFile holds the pid of the test binary that owns a directory.
	ownerFile = "owner.pid"
	// orphanAge is how old a directory without an owner file must be before
	// it is swept; younger ones may belong to a Start that is just beginning.
	orphanAge = time.Hour
)

// makeTempDir creates the bed's directory and claims it with our pid.
func makeTempDir() (string, error) {
	dir, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		return "", fmt.Errorf("create the test bed directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("write the test bed owner file: %w", err)
	}
	return dir, nil
}

// sweepStale removes the bed directories under base whose owning test binary
// is gone (killed before it could clean up), first killing any of their
// processes that are still alive. It returns the directories it removed.
func sweepStale(base string) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(base, tempPrefix+"*"))
	if err != nil {
		return nil, fmt.Errorf("list stale test bed directories: %w", err)
	}
	var removed []string
	var errs []error
	for _, dir := range dirs {
		if !isStale(dir) {
			continue
		}
		killLeftovers(dir)
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove stale test bed directory: %w", err))
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

func isStale(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		st, statErr := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist) && statErr == nil && st.IsDir() && time.Since(st.ModTime()) > orphanAge
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return true
	}
	return !alive(pid)
}

// alive reports whether a process with this pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// killLeftovers kills the process groups recorded in dir's pid files, but
// only those whose command line still names dir: a pid may have been reused
// by an unrelated process since.
func killLeftovers(dir string) {
	pidFiles, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	for _, f := range pidFiles {
		if filepath.Base(f) == ownerFile {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
