package drain_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/ec2health"
	"github.com/nodetide/nodetide/pkg/state"
)

func sample(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("../../events/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The events the cloud sends, as EventBridge delivers them, are read with
// what the drain acts on; the envelope's and detail's other fields pass.
func TestParseInterruptions(t *testing.T) {
	tests := []struct {
		file, kind string
	}{
		{"drain-lifecycle-terminate.json", state.InterruptLifecycle},
		{"drain-spot-interruption.json", state.InterruptSpot},
		{"drain-rebalance.json", state.InterruptRebalance},
		{"drain-scheduled-maintenance.json", state.InterruptMaintenance},
		{"drain-scheduled-retirement.json", state.InterruptMaintenance},
		{"drain-scheduled-reboot.json", state.InterruptMaintenance},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			ev, err := drain.ParseEvent([]byte(sample(t, tt.file)))
			if err != nil {
				t.Fatal(err)
			}
			ins := ev.Interruptions()
			if len(ins) != 1 || ins[0].Kind != tt.kind || ins[0].InstanceID != "i-0123456789abcdef0" || ins[0].At.IsZero() {
				t.Fatalf("read %+v, want one %s interruption of i-0123456789abcdef0", ins, tt.kind)
			}
		})
	}
	ev, _ := drain.ParseEvent([]byte(sample(t, "drain-lifecycle-terminate.json")))
	if in := ev.Interruptions()[0]; in.Token != "87654321-4321-4321-4321-210987654321" || in.Hook != "nodetide-drain-prod" || in.AutoScalingGroup != "prod-workers" {
		t.Errorf("lifecycle action read as %+v", in)
	}
}

// Every code the rule routes is read as a maintenance drain of the
// machines the event names (the EBS-backed retirement among them).
func TestHealthCodesParse(t *testing.T) {
	health := sample(t, "drain-scheduled-maintenance.json")
	for _, code := range ec2health.Codes() {
		t.Run(code, func(t *testing.T) {
			ev, err := drain.ParseEvent([]byte(strings.ReplaceAll(health, "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", code)))
			if err != nil {
				t.Fatal(err)
			}
			ins := ev.Interruptions()
			if len(ins) != 1 || ins[0].Kind != state.InterruptMaintenance || ins[0].Event != code {
				t.Fatalf("read %+v, want one maintenance interruption for %s", ins, code)
			}
		})
	}
}

// Forged or malformed events are refused with the field at fault, before
// anything is read from the cluster or the cloud (the handler here has
// nothing to act with: acting would panic).
func TestForgedInterruptionsAreRefused(t *testing.T) {
	life := sample(t, "drain-lifecycle-terminate.json")
	spot := sample(t, "drain-spot-interruption.json")
	health := sample(t, "drain-scheduled-maintenance.json")
	tests := []struct {
		name, event, want string
	}{
		{"lifecycle from another source", strings.Replace(life, `"aws.autoscaling"`, `"my.app"`, 1), "unsupported EventBridge event"},
		{"spot detail-type under the autoscaling source", strings.Replace(spot, `"aws.ec2"`, `"aws.autoscaling"`, 1), "unsupported EventBridge event"},
		{"launch transition", strings.Replace(life, "EC2_INSTANCE_TERMINATING", "EC2_INSTANCE_LAUNCHING", 1), "detail.LifecycleTransition"},
		{"instance ID not an instance", strings.Replace(life, `"i-0123456789abcdef0"`, `"i-../../x"`, 1), "detail.EC2InstanceId"},
		{"instance ID missing", strings.Replace(life, `"EC2InstanceId"`, `"Ec2InstanceId"`, 1), "detail.EC2InstanceId is required"},
		{"token not a token", strings.Replace(life, "87654321-4321-4321-4321-210987654321", "x", 1), "detail.LifecycleActionToken"},
		{"token a number", strings.Replace(life, `"87654321-4321-4321-4321-210987654321"`, `7`, 1), "detail.LifecycleActionToken"},
		{"hook name with a space", strings.Replace(life, `"nodetide-drain-prod"`, `"nodetide drain"`, 1), "detail.LifecycleHookName"},
		{"empty group", strings.Replace(life, `"prod-workers"`, `""`, 1), "detail.AutoScalingGroupName"},
		{"field given twice", strings.Replace(life, `"Origin": "AutoScalingGroup",`, `"EC2InstanceId": "i-0123456789abcdef1", "Origin": "AutoScalingGroup",`, 1), "given twice"},
		{"no detail", strings.Replace(spot, `"detail": {`, `"detail2": {`, 1), "detail"},
		{"no time", strings.Replace(spot, `"time": "2026-11-30T10:00:00Z",`, ``, 1), `time\" is required`},
		{"spot action unknown", strings.Replace(spot, `"terminate"`, `"explode"`, 1), "detail.instance-action"},
		{"health for another service", strings.Replace(health, `"service": "EC2"`, `"service": "RDS"`, 1), "detail.service"},
		{"health event not scheduled", strings.Replace(health, `"eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"`, `"eventTypeCode": "AWS_EC2_OPERATIONAL_ISSUE"`, 1), "detail.eventTypeCode"},
		{"health code sharing the retirement's prefix", strings.Replace(health, `"eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"`, `"eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_TEST"`, 1), "detail.eventTypeCode"},
		{"health network maintenance", strings.Replace(health, `"eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"`, `"eventTypeCode": "AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED"`, 1), "detail.eventTypeCode"},
		{"health dedicated host", strings.Replace(health, `"eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"`, `"eventTypeCode": "AWS_EC2_DEDICATED_HOST_RETIREMENT_SCHEDULED"`, 1), "detail.eventTypeCode"},
		{"health issue", strings.Replace(health, `"eventTypeCategory": "scheduledChange"`, `"eventTypeCategory": "issue"`, 1), "detail.eventTypeCategory"},
		{"health without category", strings.Replace(health, `"eventTypeCategory": "scheduledChange",`, ``, 1), "detail.eventTypeCategory"},
		{"health entity not an instance", strings.Replace(health, `{"entityValue": "i-0123456789abcdef0"`, `{"entityValue": "vol-0123"`, 1), "affectedEntities[0].entityValue"},
		{"trailing data", life + "{}", ""},
	}
	h := &drain.Handler{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Handle(context.Background(), []byte(tt.event))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
		})
	}
}
