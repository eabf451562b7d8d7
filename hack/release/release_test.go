package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"0.1.0", "1.2.3", "10.20.30", "1.0.0-rc.1", "1.0.0-alpha", "1.0.0-alpha.beta-2", "1.0.0-0", "1.0.0-x.7.z.92", "1.0.0-0a"} {
		if err := CheckVersion(v); err != nil {
			t.Errorf("CheckVersion(%q) = %v, want valid", v, err)
		}
	}
	for _, tc := range []struct{ v, want string }{
		{"", "VERSION is required: make release VERSION=x.y.z"},
		{"v0.1.0", `VERSION "v0.1.0": drop the leading v`},
		{"0.1.0+build.5", "build metadata (+...) is not used"},
		{"0.1", "is not a semantic version x.y.z or x.y.z-pre"},
		{"0.1.0.1", "is not a semantic version"},
		{"01.2.3", "is not a semantic version"},
		{"1.2.3-", "is not a semantic version"},
		{"1.2.3-01", "is not a semantic version"},
		{"1.2.3-rc..1", "is not a semantic version"},
		{"1.2.3-rc_1", "is not a semantic version"},
		{"latest", "is not a semantic version"},
		{" 1.2.3", "is not a semantic version"},
		{"1.2.3\n", "is not a semantic version"},
	} {
		err := CheckVersion(tc.v)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckVersion(%q) = %v, want an error mentioning %q", tc.v, err, tc.want)
		}
	}
}

// The zip of the same files is the same bytes whatever the files' times and
// modes on disk and the order given; the entry is executable and carries the
// time asked for.
func TestZipFilesIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode, mtime time.Time) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stamp := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a1 := write("a1", "#!bootstrap", 0o700, time.Now())
	b1 := write("b1", "other", 0o600, time.Now())
	a2 := write("a2", "#!bootstrap", 0o644, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	b2 := write("b2", "other", 0o755, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	z1, z2 := filepath.Join(dir, "1.zip"), filepath.Join(dir, "2.zip")
	if err := ZipFiles(z1, stamp, map[string]string{"bootstrap": a1, "zz": b1}); err != nil {
		t.Fatal(err)
	}
	if err := ZipFiles(z2, stamp, map[string]string{"zz": b2, "bootstrap": a2}); err != nil {
		t.Fatal(err)
	}
	one, _ := os.ReadFile(z1)
	two, _ := os.ReadFile(z2)
	if !bytes.Equal(one, two) {
		t.Fatal("the same files zipped twice differ")
	}
	zr, err := zip.NewReader(bytes.NewReader(one), int64(len(one)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.Mode() != 0o755 || !f.Modified.Equal(stamp) {
			t.Errorf("%s: mode %v, time %v; want -rwxr-xr-x, %v", f.Name, f.Mode(), f.Modified, stamp)
		}
	}
	if strings.Join(names, ",") != "bootstrap,zz" {
		t.Errorf("entries %v, want bootstrap,zz in order", names)
	}
}

func TestWriteSums(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"b.zip": "b", "a": "a", SumsFile: "stale"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := WriteSums(dir)
	if err != nil || n != 2 {
		t.Fatalf("WriteSums = %d, %v", n, err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, SumsFile))
	want := "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb  a\n" +
		"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d  b.zip\n"
	if string(got) != want {
		t.Errorf("SHA256SUMS:\n%s\nwant:\n%s", got, want)
	}
}

// The fast form of make release-check: the CLI built twice with a release's
// flags and stamp, into two directories, is the same bytes, and says the
// version, commit and date it was stamped with.
func TestStampedBuildIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI twice")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	st := Stamp{Version: "1.2.3-rc.1", Commit: "fedcba9876543210fedcba9876543210fedcba98", Date: "2026-11-30T08:00:00Z"}
	var bins []string
	for _, d := range []string{"a", "b"} {
		out := filepath.Join(t.TempDir(), d, "nodetide")
		if err := GoBuild(context.Background(), root, runtime.GOOS, runtime.GOARCH, st, nil, out, "./cmd/nodetide"); err != nil {
			t.Fatal(err)
		}
		bins = append(bins, out)
	}
	one, _ := os.ReadFile(bins[0])
	two, _ := os.ReadFile(bins[1])
	if !bytes.Equal(one, two) {
		t.Fatal("the same source built twice differs")
	}
	out, err := exec.Command(bins[0], "version", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got["version"] != st.Version || got["commit"] != st.Commit || got["date"] != st.Date || got["modified"] != nil {
		t.Errorf("version -o json of a stamped build: %s", out)
	}
}

// The stamp comes from git: HEAD's commit and committer time (not the
// clock), and a tree with changes or new files, not ignored ones, is marked.
func TestGitStamp(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_COMMITTER_DATE=2026-11-30T09:00:00+01:00", "GIT_AUTHOR_DATE=2026-11-29T00:00:00Z",
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("a.go", "package a\n")
	write(".gitignore", "/dist/\n")
	git("add", "a.go", ".gitignore")
	git("-c", "user.name=n", "-c", "user.email=n@example.com", "commit", "-q", "-m", "a")
	head := git("rev-parse", "HEAD")
	stamp := func() Stamp {
		st, err := gitStamp(context.Background(), dir, "0.1.0")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := stamp()
	if st.Commit != head || st.Date != "2026-11-30T08:00:00Z" || st.Modified || !st.Time.Equal(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("clean tree: %+v, want commit %s at the committer time in UTC", st, head)
	}
	if err := os.MkdirAll(filepath.Join(dir, "dist"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("dist/SHA256SUMS", "x")
	if stamp().Modified {
		t.Error("an ignored file marked the tree modified")
	}
	write("b.go", "package a\n")
	if !stamp().Modified {
		t.Error("an untracked file did not mark the tree modified")
	}
	if err := os.Remove(filepath.Join(dir, "b.go")); err != nil {
		t.Fatal(err)
	}
	write("a.go", "package a // changed\n")
	if !stamp().Modified {
		t.Error("a changed file did not mark the tree modified")
	}
}
