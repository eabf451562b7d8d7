package scaleway

import (
	"slices"
	"testing"

	"github.com/nodetide/nodetide/pkg/providerkind"
)

// TestKindSecrets: the secret key's secret, when the block names one.
func TestKindSecrets(t *testing.T) {
	const arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:scw"
	for _, tc := range []struct {
		block any
		want  []string
	}{
		{nil, nil},
		{&Block{Pool: "p"}, nil},
		{&Block{SecretKeySecret: arn}, []string{arn}},
	} {
		if got := Kind().Secrets(providerkind.Entry{Block: tc.block}); !slices.Equal(got, tc.want) {
			t.Errorf("block %+v: secrets %v, want %v", tc.block, got, tc.want)
		}
	}
}
