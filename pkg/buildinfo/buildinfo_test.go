package buildinfo_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/nodetide/nodetide/pkg/buildinfo"
)

func TestFrom(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	cases := []struct {
		name                  string
		version, commit, date string
		modified              string
		bi                    *debug.BuildInfo
		want                  buildinfo.Info
		str, short            string
	}{
		{
			name: "stamped release", version: "0.1.0", commit: "fedcba9876543210fedcba9876543210fedcba98", date: "2026-11-30T08:00:00Z", bi: vcs,
			// The stamp wins over what Go embedded.
			want:  buildinfo.Info{Version: "0.1.0", Commit: "fedcba9876543210fedcba9876543210fedcba98", Date: "2026-11-30T08:00:00Z", GoVersion: "go1.26.8", Platform: platform},
			str:   "0.1.0 (commit fedcba987654, 2026-11-30T08:00:00Z, go1.26.8 " + platform + ")",
			short: "0.1.0 (fedcba987654)",
		},
		{
			name: "stamped check of a modified tree", version: "0.1.0", commit: "fedcba9876543210fedcba9876543210fedcba98", date: "2026-11-30T08:00:00Z", modified: "true",
			want:  buildinfo.Info{Version: "0.1.0", Commit: "fedcba9876543210fedcba9876543210fedcba98", Date: "2026-11-30T08:00:00Z", Modified: true, GoVersion: runtime.Version(), Platform: platform},
			str:   "0.1.0 (commit fedcba987654 with uncommitted changes, 2026-11-30T08:00:00Z, " + runtime.Version() + " " + platform + ")",
			short: "0.1.0 (fedcba987654, modified)",
		},
		{
			name: "unstamped build from a modified tree", bi: vcs,
			want:  buildinfo.Info{Version: "devel", Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-12-01T10:00:00Z", Modified: true, GoVersion: "go1.26.8", Platform: platform},
			str:   "devel (commit 0123456789ab with uncommitted changes, 2026-12-01T10:00:00Z, go1.26.8 " + platform + ")",
			short: "devel (0123456789ab, modified)",
		},
		{
			name: "unstamped build without version control (go test, -buildvcs=false)", bi: &debug.BuildInfo{GoVersion: "go1.26.8"},
			want:  buildinfo.Info{Version: "devel", GoVersion: "go1.26.8", Platform: platform},
			str:   "devel (no commit recorded, go1.26.8 " + platform + ")",
			short: "devel",
		},
		{
			name: "no build information at all",
			want: buildinfo.Info{Version: "devel", GoVersion: runtime.Version(), Platform: platform},
			str:  "devel (no commit recorded, " + runtime.Version() + " " + platform + ")", short: "devel",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := buildinfo.From(tc.version, tc.commit, tc.date, tc.modified, tc.bi)
			if got != tc.want {
				t.Errorf("From = %+v\nwant   %+v", got, tc.want)
			}
			if s := got.String(); s != tc.str {
				t.Errorf("String = %q, want %q", s, tc.str)
			}
			if s := got.Short(); s != tc.short {
				t.Errorf("Short = %q, want %q", s, tc.short)
			}
		})
	}
}

// A test binary is not stamped: Read says devel, with this toolchain.
func TestReadUnstamped(t *testing.T) {
	got := buildinfo.Read()
	if got.Version != buildinfo.Devel || got.GoVersion != runtime.Version() {
		t.Errorf("Read = %+v, want version devel and Go %s", got, runtime.Version())
	}
}
