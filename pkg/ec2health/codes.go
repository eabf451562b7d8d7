// Package ec2health holds the AWS Health event types that schedule a change
// taking an EC2 instance away for a while: the one list both the drain
// function's parser and the stack's EventBridge rule use.
//
// The codes are AWS Health's (DescribeEventTypes, service EC2, category
// scheduledChange); the AWS Health User Guide names the retirement codes
// ("Running operations on EC2 instances automatically in response to events
// in AWS Health": AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED for
// EBS-backed instances, AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED for
// instance-store-backed ones) and the EC2 User Guide ("Scheduled events for
// Amazon EC2 instances") what each kind of event does to the instance. A
// list, not a prefix: a prefix misses the PERSISTENT codes of EBS-backed
// instances (every EKS node) and takes in codes that only share a prefix.
package ec2health

import "sort"

// Effect is what the scheduled change does to the instance.
type Effect string

const (
	// Goes: the instance is stopped or terminated (retirement, stop,
	// termination). A stopped node of a group does not come back by itself.
	Goes Effect = "goes"
	// Reboots: the instance, or its host, is rebooted (or loses power and
	// is then rebooted). Its pods are killed without their graceful
	// shutdown or their PodDisruptionBudget, so it is drained as well.
	Reboots Effect = "reboots"
)

// codes are the event types nodetide drains for. Left out on purpose:
// AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED (the instance only loses
// its network for a short while and keeps running; its pods are not
// restarted), the dedicated-host codes (their entities are hosts, not
// instances), and every issue or accountNotification code.
var codes = map[string]Effect{
	"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED":                   Goes, // instance-store root: terminated
	"AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED":        Goes, // EBS root: stopped
	"AWS_EC2_INSTANCE_RETIREMENT_EXPEDITED":                   Goes,
	"AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_EXPEDITED":        Goes,
	"AWS_EC2_INSTANCE_STOP_SCHEDULED":                         Goes,
	"AWS_EC2_INSTANCE_TERMINATION_SCHEDULED":                  Goes,
	"AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED":           Reboots,
	"AWS_EC2_INSTANCE_REBOOT_FLEXIBLE_MAINTENANCE_SCHEDULED":  Reboots,
	"AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED":             Reboots, // the host reboots
	"AWS_EC2_INSTANCE_POWER_MAINTENANCE_SCHEDULED":            Reboots,
	"AWS_EC2_PERSISTENT_INSTANCE_POWER_MAINTENANCE_SCHEDULED": Reboots,
}

// Codes are the event type codes drained for, sorted.
func Codes() []string {
	out := make([]string, 0, len(codes))
	for c := range codes {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Of is what the code's change does to the instance; false for a code
// nodetide does not drain for.
func Of(code string) (Effect, bool) {
	e, ok := codes[code]
	return e, ok
}
