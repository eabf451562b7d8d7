package testbed_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodetide/nodetide/internal/testbed"
)

func TestDynaliteStartUseStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	began := time.Now()
	d, err := testbed.StartDynalite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop() })
	t.Logf("dynalite answering at %s after %v", d.Endpoint, time.Since(began).Round(time.Millisecond))
	if !strings.HasPrefix(d.Endpoint, "http://127.0.0.1:") {
		t.Errorf("endpoint %q is not on loopback", d.Endpoint)
	}

	c := d.Client(t)
	putAndGet(t, c, "selftest")

	pid := d.PID()
	if err := d.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d after Stop: kill -0 gave %v, want ESRCH", pid, err)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); !os.IsNotExist(err) {
		t.Errorf("process %d still listed in /proc after Stop (stat: %v)", pid, err)
	}
	if resp, err := http.Get(d.Endpoint + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("%s still answers after Stop: %s", d.Endpoint, resp.Status)
	}
	if err := d.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestDynaliteOutlivesClientsGoneMidRequest: a client that goes away while
// sending a request (a function killed mid-step, a process stopped at a
// test's end) must not end dynalite, which every later test of the binary
// shares.
func TestDynaliteOutlivesClientsGoneMidRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	d, err := testbed.StartDynalite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop() })
	host := strings.TrimPrefix(d.Endpoint, "http://")
	for i := range 3 {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatalf("round %d: dynalite is gone: %v", i, err)
		}
		// The headers promise a body that never comes; then the
		// connection is reset, as the kernel does for a killed process.
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-amz-json-1.0\r\n"+
			"X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 100\r\n\r\n{\"Limit\"", host)
		if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		// A whole request after it: answered, or dynalite has died.
		if _, err := d.Client(t).ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
			t.Fatalf("round %d: after a client went away mid-request: %v", i, err)
		}
	}
	if err := syscall.Kill(d.PID(), 0); err != nil {
		t.Errorf("dynalite (pid %d) after clients went away mid-request: %v", d.PID(), err)
	}
}

func TestDynamoDBIsShared(t *testing.T) {
	a := testbed.DynamoDB(t)
	b := testbed.DynamoDB(t)
	if a != b {
		t.Fatalf("DynamoDB returned two instances (%s, %s), want one per test binary", a.Endpoint, b.Endpoint)
	}
	putAndGet(t, a.Client(t), "shared")
}

// putAndGet creates a table and round-trips one item through it.
func putAndGet(t *testing.T, c *dynamodb.Client, table string) {
	t.Helper()
	ctx := t.Context()
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	// Even with createTableMs 0 a table is CREATING for a moment.
	waiter := dynamodb.NewTableExistsWaiter(c, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 10*time.Second); err != nil {
		t.Fatalf("table %s not active: %v", table, err)
	}
	item := map[string]types.AttributeValue{
		"pk":    &types.AttributeValueMemberS{Value: "k"},
		"value": &types.AttributeValueMemberS{Value: "v"},
	}
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}
	// A failed condition must come back as the SDK's typed error.
	_, err = c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	var failed *types.ConditionalCheckFailedException
	if !errors.As(err, &failed) {
		t.Errorf("conditional PutItem on an existing item: got %v, want ConditionalCheckFailedException", err)
	}
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"pk": item["pk"]},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if v, ok := out.Item["value"].(*types.AttributeValueMemberS); !ok || v.Value != "v" {
		t.Errorf("GetItem returned %v, want value v", out.Item)
	}
}

func TestRepoRoot(t *testing.T) {
	// Not parallel: t.Chdir changes the whole process's directory.
	tmp := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("repo/go.mod", "// the project\nmodule github.com/nodetide/nodetide // main\n\ngo 1.26.0\n")
	write("repo/infra/go.mod", "module github.com/nodetide/nodetide/infra\n")
	write("repo/infra/app/x.go", "package app\n")
	write("other/go.mod", "module example.com/other\n")

	tests := []struct {
		name    string
		wd      string
		want    string
		wantErr string
	}{
		{name: "at the root", wd: "repo", want: "repo"},
		{name: "past a nested module", wd: "repo/infra/app", want: "repo"},
		{name: "outside the repository", wd: "other", wantErr: "no go.mod of module github.com/nodetide/nodetide"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(filepath.Join(tmp, tt.wd))
			got, err := testbed.RepoRoot()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("RepoRoot() = %q, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, _ := filepath.EvalSymlinks(filepath.Join(tmp, tt.want))
			if got, _ = filepath.EvalSymlinks(got); got != want {
				t.Errorf("RepoRoot() = %q, want %q", got, want)
			}
		})
	}

	t.Run("missing node_modules", func(t *testing.T) {
		t.Chdir(filepath.Join(tmp, "repo"))
		_, err := testbed.StartDynalite(t.Context())
		if err == nil || !strings.Contains(err.Error(), "npm ci") {
			t.Fatalf("StartDynalite without node_modules: %v, want an error saying to run npm ci", err)
		}
	})
}
