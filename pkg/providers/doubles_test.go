package providers_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodetide/nodetide/internal/fake/fakeaws"
	"github.com/nodetide/nodetide/internal/fake/fakekamatera"
	"github.com/nodetide/nodetide/internal/fake/fakescaleway"
	ngaws "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/providers/kamatera"
	"github.com/nodetide/nodetide/pkg/providers/scaleway"
)

// Providers on the doubles, built the way pkg/setup builds them from a
// config, with short retry backoffs so fault paths stay quick.

// randomHex is n random hex digits.
func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// newUUID is a random version-4 UUID (Scaleway secret keys are UUIDs).
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// awsCreds are static AWS credentials; the secret access key and the
// security token are what must never be shown.
type awsCreds struct {
	accessKeyID, secretAccessKey, securityToken string
}

func newAWSCreds() awsCreds {
	return awsCreds{
		accessKeyID:     "AKIA" + strings.ToUpper(randomHex(16)),
		secretAccessKey: "wJalrXUtnFEMI/K7MDENG/" + randomHex(18),
		securityToken:   "FwoGZXIvYXdzE" + randomHex(40),
	}
}

// awsProvider is an aws provider for one ASG of the double.
func awsProvider(t *testing.T, d *fakeaws.Server, asg string, creds awsCreds) *ngaws.Provider {
	t.Helper()
	cfg := awssdk.Config{
		Region:       d.Region(),
		Credentials:  credentials.NewStaticCredentialsProvider(creds.accessKeyID, creds.secretAccessKey, creds.securityToken),
		BaseEndpoint: awssdk.String(d.URL()),
	}
	as, ec2c := ngaws.NewClients(cfg, func(o *retry.StandardOptions) { o.MaxBackoff = time.Millisecond })
	p, err := ngaws.New(as, ec2c, ngaws.Options{AutoScalingGroup: asg})
	if err != nil {
		t.Fatalf("aws provider: %v", err)
	}
	return p
}

// awsLabelTags are CA's node-template label tags for labels.
func awsLabelTags(labels map[string]string) map[string]string {
	tags := map[string]string{}
	for k, v := range labels {
		tags[ngaws.TagTemplatePrefix+"label/"+k] = v
	}
	return tags
}

// awsGroup is an ASG whose launch template starts m5.large machines, with
// labels as CA's node-template tags; it is added to the double.
func awsGroup(d *fakeaws.Server, name string, minSize, maxSize, size int, labels map[string]string) fakeaws.Group {
	lt := fakeaws.LaunchTemplate{ID: "lt-" + randomHex(17), Name: name + "-nodes", InstanceTypes: []string{"m5.large"}}
	d.AddLaunchTemplate(lt)
	return fakeaws.Group{
		Name: name, MinSize: minSize, MaxSize: maxSize, DesiredCapacity: size,
		LaunchTemplate: &fakeaws.LaunchTemplateRef{ID: lt.ID, Version: "$Latest"},
		Tags:           awsLabelTags(labels),
	}
}

// scwProvider is a scaleway provider for one pool of the double.
func scwProvider(t *testing.T, d *fakescaleway.Server, pool, secretKey string) *scaleway.Provider {
	t.Helper()
	p, err := scaleway.New(scaleway.Options{
		CloudConfig: scaleway.CloudConfig{ClusterID: d.ClusterID(), SecretKey: secretKey, Region: d.Region().String(), APIURL: d.URL()},
		Pools:       []string{pool},
		MaxAttempts: 3,
		RetryDelay:  time.Millisecond,
	}, d.Client())
	if err != nil {
		t.Fatalf("scaleway provider: %v", err)
	}
	return p
}

// kamateraConfig is a complete Kamatera cloud config (CA's INI) for one
// group of cluster on the double at url. The API key is not in it: it is
// given to the provider apart, as from Secrets Manager.
type kamateraConfig struct {
	url, cluster, group, namePrefix string
	minSize, maxSize                int
	labels                          map[string]string
	// password is the servers' root password, "" for none; joinToken is
	// the token in the init script (both secrets too).
	password, joinToken string
	// apiClientID and apiSecret, when set, are written in [global], as in
	// cluster-autoscaler's file.
	apiClientID, apiSecret string
}

// scriptBase64 is the group's init script as the file holds it.
func (c kamateraConfig) scriptBase64() string {
	token := c.joinToken
	if token == "" {
		token = "abcdef.0123456789abcdef"
	}
	return base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\nkubeadm join 10.0.0.1:6443 --token " + token + "\n"))
}

func (c kamateraConfig) ini() string {
	var b strings.Builder
	fmt.Fprintf(&b, `[global]
kamatera-api-url = %s
cluster-name = %s
default-datacenter = EU
default-image = ubuntu_server_24.04_64-bit
default-cpu = 2A
default-ram = 4096
default-disk = "size=50"
default-network = "name=wan,ip=auto"
default-script-base64 = %s
`, c.url, c.cluster, c.scriptBase64())
	if c.apiSecret != "" {
		fmt.Fprintf(&b, "kamatera-api-client-id = %s\nkamatera-api-secret = %q\n", c.apiClientID, c.apiSecret)
	}
	if c.password != "" {
		fmt.Fprintf(&b, "default-password = %q\n", c.password)
	}
	fmt.Fprintf(&b, "\n[nodegroup %q]\nname-prefix = %s\nmin-size = %d\nmax-size = %d\n", c.group, c.namePrefix, c.minSize, c.maxSize)
	for _, k := range slices.Sorted(maps.Keys(c.labels)) {
		fmt.Fprintf(&b, "template-label = \"%s=%s\"\n", k, c.labels[k])
	}
	return b.String()
}

// tags are the tags the group's servers carry.
func (c kamateraConfig) tags() []string {
	return []string{kamatera.ClusterTagPrefix + c.cluster, kamatera.NodeGroupTagPrefix + c.group}
}

func kamateraProvider(t *testing.T, c kamateraConfig, clientID, secret string, log *slog.Logger) *kamatera.Provider {
	t.Helper()
	cfg, err := kamatera.ParseCloudConfig(strings.NewReader(c.ini()), "kamatera.ini")
	if err != nil {
		t.Fatalf("kamatera cloud config: %v", err)
	}
	opts := []kamatera.Option{
		kamatera.WithCredentials(clientID, secret),
		kamatera.WithLookupEnv(func(string) (string, bool) { return "", false }),
		kamatera.WithRetry(3, time.Millisecond),
		kamatera.WithRequestTimeout(10 * time.Second),
		kamatera.WithCacheTTL(0),
	}
	if log != nil {
		opts = append(opts, kamatera.WithLogger(log))
	}
	p, err := kamatera.New(cfg, nil, opts...)
	if err != nil {
		t.Fatalf("kamatera provider: %v", err)
	}
	return p
}

// newKamateraDouble starts a double that accepts clientID / secret.
func newKamateraDouble(t *testing.T, clientID, secret string) *fakekamatera.Double {
	t.Helper()
	d := fakekamatera.New(fakekamatera.WithCredentials(clientID, secret))
	t.Cleanup(d.Close)
	return d
}
