package snapshottest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// Write is s as a document in the full or the compact form.
func Write(t testing.TB, s snapshot.Snapshot, compact bool) []byte {
	t.Helper()
	var b bytes.Buffer
	write := snapshot.WriteSnapshot
	if compact {
		write = snapshot.WriteCompactSnapshot
	}
	if err := write(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Read reads a document that must be valid.
func Read(t testing.TB, doc []byte) snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.ReadSnapshot(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%v\n%.2000s", err, doc)
	}
	return s
}

// Normalized applies what writing does to empty collections, so a snapshot
// compares with one read back.
func Normalized(s snapshot.Snapshot) snapshot.Snapshot {
	var b bytes.Buffer
	_ = snapshot.WriteSnapshot(&b, s)
	var out snapshot.Snapshot
	_ = json.Unmarshal(b.Bytes(), &out)
	return out
}

// Golden reads the snapshot.json of every fixture directory under dir.
func Golden(t testing.TB, dir string) map[string]snapshot.Snapshot {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*", "snapshot.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden snapshots in %s: %v", dir, err)
	}
	out := map[string]snapshot.Snapshot{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out[path] = Read(t, data)
	}
	return out
}
