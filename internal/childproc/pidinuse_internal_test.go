package childproc

import (
	"os"
	"os/exec"
	"testing"
)

// TestPidInUse: Stop's last group kill is sent only when no process has
// the reaped child's pid, which another process may have been given since.
func TestPidInUse(t *testing.T) {
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pid  int
		want bool
	}{
		{"a running process", os.Getpid(), true},
		{"a reaped child", ended.Process.Pid, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pidInUse(tc.pid); got != tc.want {
				t.Errorf("pidInUse(%d) = %t, want %t", tc.pid, got, tc.want)
			}
		})
	}
}
