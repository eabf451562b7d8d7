package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/buildinfo"
)

// TestVersion: nodetide version and --version say what this build is; a
// test binary is not stamped, so devel, with this toolchain.
func TestVersion(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	t.Run("-o json", func(t *testing.T) {
		out, errOut, code := nodetide(t, "version", "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if got["version"] != "devel" || got["goVersion"] != runtime.Version() || got["platform"] != platform {
			t.Errorf("version -o json = %s", out)
		}
	})
	t.Run("-o yaml", func(t *testing.T) {
		out, _, code := nodetide(t, "version", "-o", "yaml")
		if code != 0 || !strings.Contains(out, "version: devel\n") || !strings.Contains(out, "goVersion: "+runtime.Version()+"\n") {
			t.Errorf("version -o yaml: exit %d\n%s", code, out)
		}
	})
	// --version only: -v is --verbose, as kubectl's -v is its log level.
	for _, flag := range []string{"--version"} {
		t.Run(flag, func(t *testing.T) {
			out, errOut, code := nodetide(t, flag)
			want := "nodetide devel (no commit recorded, " + runtime.Version() + " " + platform + ")\n"
			if code != 0 || out != want || errOut != "" {
				t.Errorf("nodetide %s: exit %d, stdout %q, stderr %q; want %q", flag, code, out, errOut, want)
			}
		})
	}
	t.Run("bad -o", func(t *testing.T) {
		_, errOut, code := nodetide(t, "version", "-o", "xml")
		if code != 1 || !strings.Contains(errOut, `--output "xml": use one of [table json yaml]`) {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("no arguments", func(t *testing.T) {
		_, errOut, code := nodetide(t, "version", "extra")
		if code != 1 || !strings.Contains(errOut, `nodetide version takes no arguments, got "extra"`) {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
}

// TestVersionTable: the table of a stamped release and of a devel build
// from a modified tree.
func TestVersionTable(t *testing.T) {
	for _, tc := range []struct {
		in   buildinfo.Info
		want string
	}{
		{buildinfo.Info{Version: "0.1.0", Commit: "fedcba9876543210fedcba9876543210fedcba98", Date: "2026-11-30T08:00:00Z", GoVersion: "go1.26.8", Platform: "darwin/arm64"},
			"Version:     0.1.0\nCommit:      fedcba9876543210fedcba9876543210fedcba98\nDate:        2026-11-30T08:00:00Z\nGo version:  go1.26.8\nPlatform:    darwin/arm64\n"},
		{buildinfo.Info{Version: "devel", Commit: "0123456789abcdef0123456789abcdef01234567", Modified: true, GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"Version:     devel\nCommit:      0123456789abcdef0123456789abcdef01234567 (with uncommitted changes)\nDate:        -\nGo version:  go1.26.8\nPlatform:    linux/amd64\n"},
	} {
		var b bytes.Buffer
		if err := writeVersion(&b, "table", tc.in); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("table:\n%s\nwant:\n%s", b.String(), tc.want)
		}
	}
}
