package state_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodetide/nodetide/pkg/state"
)

func TestStatusRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(string) state.Store) {
		ctx := t.Context()
		a, b := open("a").(state.StatusStore), open("b").(state.StatusStore)
		if _, err := a.GetStatus(ctx, "evaluate"); !errors.Is(err, state.ErrNoStatus) {
			t.Fatalf("GetStatus before any write = %v, want ErrNoStatus", err)
		}
		// The largest document accepted is stored whole: DynamoDB holds it
		// gzipped, so the item (dynalite enforces DynamoDB's 400 KB limit)
		// is far smaller than the document.
		big := []byte(`{"x":"` + strings.Repeat("y", state.MaxStatusDocument-8) + `"}`)
		for _, doc := range [][]byte{[]byte(`{"cycle":1}`), big} {
			if err := a.PutStatus(ctx, "evaluate", doc); err != nil {
				t.Fatalf("PutStatus of %d bytes: %v", len(doc), err)
			}
			got, err := a.GetStatus(ctx, "evaluate")
			if err != nil || !bytes.Equal(got, doc) {
				t.Fatalf("GetStatus = %d bytes, %v; want the %d bytes written", len(got), err, len(doc))
			}
		}
		// Too large: refused, the stored one unchanged.
		err := a.PutStatus(ctx, "evaluate", append(big, ' '))
		if err == nil || !strings.Contains(err.Error(), "over the") {
			t.Fatalf("PutStatus over the limit = %v, want a refusal", err)
		}
		if got, _ := a.GetStatus(ctx, "evaluate"); !bytes.Equal(got, big) {
			t.Fatal("a refused PutStatus changed the stored status")
		}
		// Another cluster in the same table sees none of it.
		if _, err := b.GetStatus(ctx, "evaluate"); !errors.Is(err, state.ErrNoStatus) {
			t.Fatalf("other cluster's GetStatus = %v, want ErrNoStatus", err)
		}
	})
}

// A document whose gzip would not fit one DynamoDB item is refused before
// the write, naming both sizes, and the stored one stays.
func TestStatusOverTheItemLimitGzipped(t *testing.T) {
	ctx := t.Context()
	client := dynamoClient(t)
	table := tableName(t)
	if err := state.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	store := state.NewDynamoDB(client, table, "prod")
	if err := store.PutStatus(ctx, "evaluate", []byte(`{"cycle":1}`)); err != nil {
		t.Fatal(err)
	}
	// Random bytes do not compress: their hex is about half its size gzipped.
	noise := make([]byte, state.MaxStatusSize)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"x":"` + hex.EncodeToString(noise) + `"}`)
	err := store.PutStatus(ctx, "evaluate", doc)
	if err == nil || !strings.Contains(err.Error(), "gzipped, over the") {
		t.Fatalf("PutStatus of %d incompressible bytes = %v, want refused by its gzipped size", len(doc), err)
	}
	if got, err := store.GetStatus(ctx, "evaluate"); err != nil || string(got) != `{"cycle":1}` {
		t.Fatalf("after the refusal GetStatus = %q, %v; want the earlier status", got, err)
	}
}

// In DynamoDB the status is stored gzipped, so a cycle's write costs a
// fraction of the write units; one stored as a string by an earlier version
// still reads, and a damaged one is refused naming the attribute.
func TestStatusStoredCompressed(t *testing.T) {
	ctx := t.Context()
	client := dynamoClient(t)
	table := tableName(t)
	if err := state.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	store := state.NewDynamoDB(client, table, "prod")
	// A status as evaluate writes it at 200 nodes: 86 unneeded nodes.
	var doc strings.Builder
	doc.WriteString(`{"cycleAt":"2026-12-02T02:30:00Z","nodeGroups":[{"name":"workers","provider":"aws","minSize":1,"maxSize":300}],"unneeded":[`)
	for i := range 86 {
		if i > 0 {
			doc.WriteString(",")
		}
		fmt.Fprintf(&doc, `{"node":"ip-10-0-%d-%d.eu-west-1.compute.internal","nodeGroup":"workers","since":"2026-12-02T02:%02d:%02d.123Z"}`, i/10, i, i%60, (i*7)%60)
	}
	doc.WriteString(`],"drains":[],"actions":[],"problems":[]}`)
	raw := []byte(doc.String())
	if err := store.PutStatus(ctx, "evaluate", raw); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "CLUSTER#prod"},
		"sk": &types.AttributeValueMemberS{Value: "STATUS#evaluate"},
	}
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	z, ok := out.Item["docGzip"].(*types.AttributeValueMemberB)
	if !ok || out.Item["doc"] != nil {
		t.Fatalf("stored attributes %v, want docGzip alone", out.Item)
	}
	if len(z.Value)*4 > len(raw) {
		t.Errorf("stored %d bytes for a %d-byte status, want under a quarter", len(z.Value), len(raw))
	}
	t.Logf("status of %d bytes stored in %d", len(raw), len(z.Value))
	if got, err := store.GetStatus(ctx, "evaluate"); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("GetStatus = %d bytes, %v; want the %d written", len(got), err, len(raw))
	}

	// Written as a string by an earlier version.
	old := maps.Clone(key)
	old["doc"] = &types.AttributeValueMemberS{Value: `{"cycle":1}`}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: old}); err != nil {
		t.Fatal(err)
	}
	if got, err := store.GetStatus(ctx, "evaluate"); err != nil || string(got) != `{"cycle":1}` {
		t.Fatalf("GetStatus of a string status = %q, %v", got, err)
	}

	// Damaged: refused, naming the attribute.
	bad := maps.Clone(key)
	bad["docGzip"] = &types.AttributeValueMemberB{Value: []byte("not gzip")}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: bad}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.GetStatus(ctx, "evaluate"); err == nil || !strings.Contains(err.Error(), "docGzip") {
		t.Fatalf("GetStatus of a damaged status = %v, want an error naming docGzip", err)
	}
}
