package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSweepStale(t *testing.T) {
	// The pid of a process that has ended: an owner killed mid-run.
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := strconv.Itoa(exited.Process.Pid)

	tests := []struct {
		name      string
		dir       string
		owner     string // owner file content; "" for none
		age       time.Duration
		wantSwept bool
	}{
		{name: "owner gone", dir: tempPrefix + "dead", owner: deadPID, wantSwept: true},
		{name: "owner alive", dir: tempPrefix + "alive", owner: strconv.Itoa(os.Getpid())},
		{name: "garbage owner", dir: tempPrefix + "garbage", owner: "x", wantSwept: true},
		{name: "no owner yet", dir: tempPrefix + "young"},
		{name: "no owner, old", dir: tempPrefix + "old", age: 2 * orphanAge, wantSwept: true},
		{name: "not ours", dir: "something-else", owner: deadPID},
	}
	base := t.TempDir()
	for _, tt := range tests {
		dir := filepath.Join(base, tt.dir)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if tt.owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(tt.owner), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if tt.age > 0 {
			old := time.Now().Add(-tt.age)
			if err := os.Chtimes(dir, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}

	removed, err := sweepStale(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(base, tt.dir)
			_, statErr := os.Stat(dir)
			if swept := os.IsNotExist(statErr); swept != tt.wantSwept {
				t.Errorf("swept = %v, want %v", swept, tt.wantSwept)
			}
			if got := slices.Contains(removed, dir); got != tt.wantSwept {
				t.Errorf("reported as removed = %v, want %v", got, tt.wantSwept)
			}
		})
	}
}

func TestSweepStaleKillsLeftovers(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, tempPrefix+"killed")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(exited.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A component left behind: its command line names the directory, as the
	// bed's components' do, and it has a child in its group.
	leftover := exec.Command("sh", "-c", "sleep 60; :", dir)
	leftover.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := leftover.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-leftover.Process.Pid, syscall.SIGKILL) })
	if err := os.WriteFile(filepath.Join(dir, "etcd.pid"), []byte(strconv.Itoa(leftover.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Wait for sh to start its sleep, so the group really has a child.
	for deadline := time.Now().Add(10 * time.Second); !groupHasChild(t, leftover.Process.Pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("sh started no child within 10s")
		}
	}

	if _, err := sweepStale(base); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- leftover.Wait() }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("leftover process still alive after the sweep")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory still there after the sweep (stat: %v)", err)
	}
}

func TestNamespacePrefix(t *testing.T) {
	tests := []struct {
		name, testName, want string
	}{
		{"simple", "TestFoo", "testfoo-"},
		{"subtest", "TestFoo/bar_baz", "testfoo-bar-baz-"},
		{"long", "TestAVeryLongNameThatGoesOnAndOnAndOnForeverAndEver", "testaverylongnamethatgoesonandonandonfor-"},
		{"only symbols", "/__/", "test-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := namespacePrefix(tt.testName); got != tt.want {
				t.Errorf("namespacePrefix(%q) = %q, want %q", tt.testName, got, tt.want)
			}
		})
	}
}

// groupHasChild reports whether a process other than pgid is in process
// group pgid (from /proc/<pid>/stat: pid (comm) state ppid pgrp ...).
func groupHasChild(t *testing.T, pgid int) bool {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended meanwhile
		}
		// comm may hold spaces and parentheses; the last ") " ends it.
		i := strings.LastIndex(string(b), ") ")
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b)[i+2:])
		if len(f) < 3 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if pgrp, _ := strconv.Atoi(f[2]); pgrp == pgid && pid != pgid {
			return true
		}
	}
	return false
}
