package kamatera

import (
	"slices"
	"testing"

	"github.com/nodetide/nodetide/pkg/providerkind"
)

// TestKindSecrets: the credentials' secret, then the INI's, each when set.
func TestKindSecrets(t *testing.T) {
	const creds, ini = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:creds", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ini"
	for _, tc := range []struct {
		block any
		want  []string
	}{
		{nil, nil},
		{&Block{CloudConfig: "k.ini"}, nil},
		{&Block{CloudConfigSecret: ini}, []string{ini}},
		{&Block{CloudConfigSecret: ini, CredentialsSecret: creds}, []string{creds, ini}},
	} {
		if got := Kind().Secrets(providerkind.Entry{Block: tc.block}); !slices.Equal(got, tc.want) {
			t.Errorf("block %+v: secrets %v, want %v", tc.block, got, tc.want)
		}
	}
}
