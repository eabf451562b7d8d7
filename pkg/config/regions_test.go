package config

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAWSRegionsMatchSDK: the region table is the AWS SDK's, for the SDK
// version go.mod requires. After an SDK update that adds a region, copy
// the regions of its partitions.json (all but the "-global" ones) here.
func TestAWSRegionsMatchSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-sdk-go-v2").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go list -m github.com/aws/aws-sdk-go-v2: %v (the module must be in the module cache: go mod download)", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "internal", "endpoints", "awsrulesfn", "partitions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Partitions []struct {
			Regions map[string]json.RawMessage `json:"regions"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var sdk []string
	for _, p := range doc.Partitions {
		for r := range p.Regions {
			if !strings.HasSuffix(r, "-global") {
				sdk = append(sdk, r)
			}
		}
	}
	slices.Sort(sdk)
	ours := slices.Sorted(slices.Values(awsRegions))
	if !slices.Equal(sdk, ours) {
		t.Errorf("region table differs from the SDK's partitions.json:\nSDK:  %v\nours: %v", sdk, ours)
	}
}

// TestConfigRegions: every AWS region the config takes is checked; a bad
// one names the field, the value and the nearest known regions.
func TestConfigRegions(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"good everywhere", `cluster: {name: c, kubernetes: {eks: {name: c, region: eu-west-1}}}
state: {dynamodb: {table: t, region: us-gov-west-1}}
nodeGroups: [{name: w, provider: aws, aws: {autoScalingGroup: w, region: cn-north-1}}]
`, ""},
		{"unset: the environment's", `cluster: {name: c, kubernetes: {eks: {name: c}}}
state: {dynamodb: {table: t}}
nodeGroups: [{name: w, provider: aws, aws: {autoScalingGroup: w}}]
`, ""},
		{"eks", `cluster: {name: c, kubernetes: {eks: {name: c, region: eu-wset-1}}}
state: {memory: {}}
nodeGroups: [{name: w, provider: aws, aws: {autoScalingGroup: w}}]
`, `x.yaml:1: cluster.kubernetes.eks.region: "eu-wset-1" is not an AWS region (the nearest known are eu-west-1, `},
		{"a local DynamoDB names its own", `cluster: {name: c}
state: {dynamodb: {table: t, region: local, endpoint: "http://localhost:4567"}}
nodeGroups: [{name: w, provider: aws, aws: {autoScalingGroup: w}}]
`, ""},
		{"dynamodb", `cluster: {name: c}
state: {dynamodb: {table: t, region: Ireland}}
nodeGroups: [{name: w, provider: aws, aws: {autoScalingGroup: w}}]
`, `state.dynamodb.region: "Ireland" is not an AWS region`},
		{"node group", `cluster: {name: c}
state: {memory: {}}
nodeGroups: [{name: w, provider: aws, aws: {autoScalingGroup: w, region: us-east-7}}]
`, `nodeGroups[0].aws.region: "us-east-7" is not an AWS region (the nearest known are us-east-1, us-east-2, `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "x.yaml")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
