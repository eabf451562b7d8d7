package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/ec2health"
)

// healthCodes is the health rule's eventTypeCode list as the template has it.
func healthCodes() []any {
	var out []any
	for _, c := range ec2health.Codes() {
		out = append(out, c)
	}
	return out
}

// healthEvent is one event put on the bus: a sample from events/ with its
// detail changed, and whether the health rule must route it.
type healthEvent struct {
	name   string
	source string
	typ    string
	detail map[string]any
	routed bool
}

// healthEvents are the samples, every listed code, and near misses: other
// services, categories and sources, an issue code, the codes left out on
// purpose, and codes that merely share a listed code's prefix.
func healthEvents(t *testing.T) []healthEvent {
	t.Helper()
	read := func(file string) (string, string, map[string]any) {
		data, err := os.ReadFile("../../events/" + file)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Source     string         `json:"source"`
			DetailType string         `json:"detail-type"`
			Detail     map[string]any `json:"detail"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return ev.Source, ev.DetailType, ev.Detail
	}
	var out []healthEvent
	for _, f := range []string{"drain-scheduled-maintenance.json", "drain-scheduled-retirement.json", "drain-scheduled-reboot.json"} {
		src, typ, d := read(f)
		out = append(out, healthEvent{name: f, source: src, typ: typ, detail: d, routed: true})
	}
	src, typ, base := read("drain-scheduled-maintenance.json")
	with := func(name string, routed bool, kv ...string) healthEvent {
		d := map[string]any{}
		for k, v := range base {
			d[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			d[kv[i]] = kv[i+1]
		}
		return healthEvent{name: name, source: src, typ: typ, detail: d, routed: routed}
	}
	for _, c := range ec2health.Codes() {
		out = append(out, with(c, true, "eventTypeCode", c))
	}
	for _, c := range []string{
		"AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED", // keeps running
		"AWS_EC2_DEDICATED_HOST_RETIREMENT_SCHEDULED",    // a host, not an instance
		"AWS_EC2_INSTANCE_STORE_DRIVE_PERFORMANCE_DEGRADED",
		"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_TEST", // shares a listed code's prefix
		"AWS_EC2_INSTANCE_REBOOT",
		"AWS_EC2_OPERATIONAL_ISSUE",
	} {
		out = append(out, with(c, false, "eventTypeCode", c))
	}
	out = append(out,
		with("RDS service", false, "service", "RDS"),
		with("issue category", false, "eventTypeCategory", "issue"),
		with("accountNotification category", false, "eventTypeCategory", "accountNotification"),
	)
	other := with("another source", false)
	other.source = "my.app"
	abuse := with("abuse event", false)
	abuse.typ = "AWS Health Abuse Event"
	return append(out, other, abuse)
}

// The health rule's synthesized pattern, put into EventBridge (moto's), routes
// the samples and every listed code to its target and nothing else. moto does
// not implement TestEventPattern, but a rule with an SQS target routes what is
// put on the bus.
func TestHealthRuleRoutes(t *testing.T) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Skip("moto_server is not installed (pip install 'moto[server]'): the health rule's pattern is not run")
	}
	f := synth(t, options(t, map[string]string{}), false)
	var pattern any
	for _, r := range f.resources("AWS::Events::Rule") {
		p, _ := props(r)["EventPattern"].(map[string]any)
		if src, _ := p["source"].([]any); len(src) == 1 && src[0] == "aws.health" {
			pattern = p
		}
	}
	if pattern == nil {
		t.Fatal("no rule for aws.health")
	}
	raw, _ := json.Marshal(pattern)

	aws := startMoto(t, bin)
	queue := aws.call(t, "sqs", "AmazonSQS.CreateQueue", map[string]any{"QueueName": "health"})["QueueUrl"].(string)
	attrs := aws.call(t, "sqs", "AmazonSQS.GetQueueAttributes", map[string]any{"QueueUrl": queue, "AttributeNames": []string{"QueueArn"}})
	queueArn := attrs["Attributes"].(map[string]any)["QueueArn"].(string)
	aws.call(t, "events", "AWSEvents.PutRule", map[string]any{"Name": "health", "EventPattern": string(raw)})
	aws.call(t, "events", "AWSEvents.PutTargets", map[string]any{"Rule": "health", "Targets": []any{map[string]any{"Id": "q", "Arn": queueArn}}})

	events := healthEvents(t)
	for i, ev := range events {
		ev.detail["eventArn"] = fmt.Sprintf("case-%d", i)
		detail, _ := json.Marshal(ev.detail)
		out := aws.call(t, "events", "AWSEvents.PutEvents", map[string]any{"Entries": []any{map[string]any{
			"Source": ev.source, "DetailType": ev.typ, "Detail": string(detail), "Resources": []string{"i-0123456789abcdef0"},
		}}})
		if n, _ := out["FailedEntryCount"].(float64); n != 0 {
			t.Fatalf("PutEvents %s: %v", ev.name, out)
		}
	}
	var got []string
	for {
		out := aws.call(t, "sqs", "AmazonSQS.ReceiveMessage", map[string]any{"QueueUrl": queue, "MaxNumberOfMessages": 10})
		msgs, _ := out["Messages"].([]any)
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			var body struct {
				Detail struct {
					EventArn string `json:"eventArn"`
				} `json:"detail"`
			}
			if err := json.Unmarshal([]byte(m.(map[string]any)["Body"].(string)), &body); err != nil {
				t.Fatal(err)
			}
			got = append(got, body.Detail.EventArn)
			aws.call(t, "sqs", "AmazonSQS.DeleteMessage", map[string]any{"QueueUrl": queue, "ReceiptHandle": m.(map[string]any)["ReceiptHandle"]})
		}
	}
	for i, ev := range events {
		if routed := slices.Contains(got, fmt.Sprintf("case-%d", i)); routed != ev.routed {
			t.Errorf("%s (%s, %s, %v, %v): routed %v, want %v", ev.name, ev.source, ev.typ,
				ev.detail["eventTypeCategory"], ev.detail["eventTypeCode"], routed, ev.routed)
		}
	}
}

// moto is a moto_server on a loopback port.
type moto struct{ url string }

func startMoto(t *testing.T, bin string) moto {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	m := moto{url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(m.url + "/moto-api/"); err == nil {
			resp.Body.Close()
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("moto_server did not start: %s", logs.String())
		}
	}
}

// call makes one AWS JSON-protocol call (moto checks no signature).
func (m moto) call(t *testing.T, service, target string, in any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(in)
	req, _ := http.NewRequest("POST", m.url+"/", bytes.NewReader(body))
	ct := "application/x-amz-json-1.1"
	if service == "sqs" {
		ct = "application/x-amz-json-1.0"
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/"+service+
		"/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", target, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", target, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	out := map[string]any{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s: %v: %s", target, err, data)
		}
	}
	return out
}
