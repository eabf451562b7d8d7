package config

import (
	"fmt"
	"slices"
	"strings"
)

// awsRegions are the regions of every AWS partition, as the AWS SDK for Go
// v2 that go.mod requires lists them (partitions.json of its
// internal/endpoints/awsrulesfn package, which Go does not let another
// module import). TestAWSRegionsMatchSDK fails when an SDK update adds or
// removes one, so the table moves with the SDK. The partitions' "-global"
// pseudo-regions are left out: no resource nodetide uses lives there.
var awsRegions = []string{
	// aws
	"af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
	"ap-south-1", "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4",
	"ap-southeast-5", "ap-southeast-6", "ap-southeast-7", "ca-central-1", "ca-west-1", "eu-central-1",
	"eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3",
	"il-central-1", "me-central-1", "me-south-1", "me-west-1", "mx-central-1", "sa-east-1",
	"sa-west-1", "us-east-1", "us-east-2", "us-west-1", "us-west-2",
	// aws-cn
	"cn-north-1", "cn-northwest-1",
	// aws-eusc
	"eusc-de-east-1",
	// aws-iso
	"us-iso-east-1", "us-iso-west-1",
	// aws-iso-b
	"us-isob-east-1", "us-isob-west-1",
	// aws-iso-e
	"eu-isoe-west-1",
	// aws-iso-f
	"us-isof-east-1", "us-isof-south-1",
	// aws-us-gov
	"us-gov-east-1", "us-gov-west-1",
}

// CheckAWSRegion reports whether r is an AWS region the SDK knows; the
// error names the closest known ones.
func CheckAWSRegion(r string) error {
	if slices.Contains(awsRegions, r) {
		return nil
	}
	return fmt.Errorf("%q is not an AWS region (the nearest known are %s)", r, strings.Join(nearestRegions(r, 3), ", "))
}

// nearestRegions are the n known regions closest to r in edit distance,
// closest first: a typo's likely meaning.
func nearestRegions(r string, n int) []string {
	sorted := slices.Clone(awsRegions)
	slices.SortStableFunc(sorted, func(a, b string) int { return editDistance(r, a) - editDistance(r, b) })
	return sorted[:n]
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
