package snapshot_test

import (
	"bytes"
	"testing"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
)

func BenchmarkDecodeSnapshot(b *testing.B) {
	var doc bytes.Buffer
	if err := snapshot.WriteSnapshot(&doc, snapshottest.Synthetic(5000, 30, 0.05, 5000)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(doc.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := snapshot.ReadSnapshot(bytes.NewReader(doc.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
}
