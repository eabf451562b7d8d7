package lambdarun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"testing"

	"github.com/nodetide/nodetide/pkg/buildinfo"
	"github.com/nodetide/nodetide/pkg/lambdarun"
	"github.com/nodetide/nodetide/pkg/state"
)

// The cold start's log line names the build.
func TestLogBuild(t *testing.T) {
	var out bytes.Buffer
	b := buildinfo.Info{Version: "0.1.0", Commit: "fedcba9876543210fedcba9876543210fedcba98", Date: "2026-11-30T08:00:00Z", GoVersion: "go1.26.8", Platform: "linux/arm64"}
	lambdarun.LogBuild(slog.New(slog.NewJSONHandler(&out, nil)).With("function", "drain"), b)
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	want := map[string]any{"msg": "build", "function": "drain", "version": "0.1.0", "commit": b.Commit,
		"date": b.Date, "modified": false, "goVersion": "go1.26.8", "platform": "linux/arm64"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, got[k], v, out.String())
		}
	}
}

// RecordBuild stores this binary's build for the function, once; a store
// that keeps no status is left alone, and a failing one only logs.
func TestRecordBuild(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	store := state.NewMemory("c1")
	lambdarun.RecordBuild(ctx, store, "schedule", log)
	got, err := state.ReadBuild(ctx, store, "schedule")
	if err != nil || got.Build.Version != buildinfo.Devel || got.Build.GoVersion != runtime.Version() {
		t.Fatalf("recorded %+v, %v; want this test binary's build", got, err)
	}
	lambdarun.RecordBuild(ctx, struct{}{}, "schedule", log) // keeps no status: nothing to do
	lambdarun.RecordBuild(ctx, failingStore{}, "drain", log)
	if !bytes.Contains(logs.Bytes(), []byte(`"msg":"record build","error":"table gone"`)) {
		t.Errorf("a failing store was not logged: %s", logs.String())
	}
}

type failingStore struct{}

func (failingStore) PutStatus(context.Context, string, []byte) error { return errors.New("table gone") }
func (failingStore) GetStatus(context.Context, string) ([]byte, error) {
	return nil, errors.New("table gone")
}
