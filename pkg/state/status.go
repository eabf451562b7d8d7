package state

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// StatusStore keeps one status document per writer (sk STATUS#<name>): the
// summary of its last run, for `nodetide status`. The writer holds its
// lease, so a plain overwrite is enough.
type StatusStore interface {
	PutStatus(ctx context.Context, name string, doc []byte) error
	// GetStatus fails with ErrNoStatus when nothing was written yet.
	GetStatus(ctx context.Context, name string) ([]byte, error)
}

// MaxStatusSize bounds a status item as DynamoDB stores it (the gzipped
// document): its item limit is 400 KB, keys and attribute names included.
// Readers such as the status ConfigMap use it as their budget too.
const MaxStatusSize = 380 * 1024

// MaxStatusDocument bounds a status document before compression: at the
// status's caps with every name at the longest Kubernetes allows it is
// about 500 KB of JSON, which gzips to a tenth of that.
const MaxStatusDocument = 4 << 20

// ErrNoStatus means no status document has been written yet.
var ErrNoStatus = errors.New("no status written yet")

const (
	statusPrefix = "STATUS#"
	// attrDoc holds a document as written by earlier versions (a string);
	// attrDocGzip the gzip of it (binary), as written now.
	attrDoc     = "doc"
	attrDocGzip = "docGzip"
)

func checkStatus(name string, doc []byte) error {
	if name == "" {
		return errors.New("put status: empty name")
	}
	if len(doc) > MaxStatusDocument {
		return fmt.Errorf("put status %s: document of %d bytes is over the %d-byte limit", name, len(doc), MaxStatusDocument)
	}
	return nil
}

// PutStatus stores doc as the named status.
func (m *Memory) PutStatus(_ context.Context, name string, doc []byte) error {
	if err := checkStatus(name, doc); err != nil {
		return err
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.statuses == nil {
		m.statuses = map[string][]byte{}
	}
	m.statuses[name] = append([]byte(nil), doc...)
	return nil
}

// GetStatus returns the named status.
func (m *Memory) GetStatus(_ context.Context, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	doc, ok := m.statuses[name]
	if !ok {
		return nil, fmt.Errorf("status %s of cluster %s: %w", name, m.cluster, ErrNoStatus)
	}
	return append([]byte(nil), doc...), nil
}

// PutStatus stores doc as the named status, gzipped: evaluate writes it every
// cycle and DynamoDB bills a write per KB of item, so a status of 8 KB (200
// nodes, 86 unneeded) would cost 9 write units a cycle; its repetitive JSON
// shrinks about fivefold.
func (s *DynamoDB) PutStatus(ctx context.Context, name string, doc []byte) error {
	if err := checkStatus(name, doc); err != nil {
		return err
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	if _, err := zw.Write(doc); err != nil {
		return fmt.Errorf("put status %s: compress: %w", name, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("put status %s: compress: %w", name, err)
	}
	if z.Len() > MaxStatusSize {
		return fmt.Errorf("put status %s: document of %d bytes is %d gzipped, over the %d-byte item limit", name, len(doc), z.Len(), MaxStatusSize)
	}
	item := s.key(statusPrefix + name)
	item[attrDocGzip] = &types.AttributeValueMemberB{Value: z.Bytes()}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("put status %s of cluster %q: %w", name, s.cluster, err)
	}
	return nil
}

// GetStatus returns the named status, written gzipped or, by an earlier
// version, as a string.
func (s *DynamoDB) GetStatus(ctx context.Context, name string) ([]byte, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: s.key(statusPrefix + name), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get status %s of cluster %q: %w", name, s.cluster, err)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("status %s of cluster %q: %w", name, s.cluster, ErrNoStatus)
	}
	if z, ok := out.Item[attrDocGzip].(*types.AttributeValueMemberB); ok {
		doc, err := gunzip(z.Value)
		if err != nil {
			return nil, fmt.Errorf("status %s of cluster %q: attribute %s: %w", name, s.cluster, attrDocGzip, err)
		}
		return doc, nil
	}
	v, ok := out.Item[attrDoc].(*types.AttributeValueMemberS)
	if !ok {
		return nil, fmt.Errorf("status %s of cluster %q: attribute %s or %s missing or of the wrong type", name, s.cluster, attrDocGzip, attrDoc)
	}
	return []byte(v.Value), nil
}

// gunzip reads a stored document, refusing one that inflates past
// MaxStatusDocument (no writer makes one).
func gunzip(z []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	doc, err := io.ReadAll(io.LimitReader(zr, MaxStatusDocument+1))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if len(doc) > MaxStatusDocument {
		return nil, fmt.Errorf("inflates past %d bytes", MaxStatusDocument)
	}
	return doc, nil
}
