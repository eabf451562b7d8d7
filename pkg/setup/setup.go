// Package setup builds, from a loaded config, the clients the functions and
// the CLI share: the Kubernetes client, the node-group providers and the state
// store. It holds the wiring, so the Lambda mains and the CLI commands stay
// thin.
package setup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/pkg/config"
	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/providerkind"
	"github.com/nodetide/nodetide/pkg/providers"
	awsprovider "github.com/nodetide/nodetide/pkg/providers/aws"
	"github.com/nodetide/nodetide/pkg/schedule"
	"github.com/nodetide/nodetide/pkg/shadowcompare"
	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/statusmap"
)

// Environment variables the functions read their config from (first set wins).
const (
	EnvConfig          = "NODETIDE_CONFIG"           // the YAML itself
	EnvConfigFile      = "NODETIDE_CONFIG_FILE"      // a path
	EnvConfigParameter = "NODETIDE_CONFIG_PARAMETER" // an SSM parameter name
	// EnvDrainStateMachine is the drain state machine's ARN; without it
	// removals are planned and logged, not started.
	EnvDrainStateMachine = "NODETIDE_DRAIN_STATE_MACHINE_ARN"
)

// AWS loads the AWS SDK config once, on first use, so runs that need no AWS
// service (a kubeconfig and in-memory state) never look for credentials.
type AWS struct {
	Region string
	cfg    *aws.Config
}

// Config returns the SDK config (default chain: env, shared files, role).
func (a *AWS) Config(ctx context.Context) (aws.Config, error) {
	if a.cfg != nil {
		return *a.cfg, nil
	}
	var opts []func(*awsconfig.LoadOptions) error
	if a.Region != "" {
		opts = append(opts, awsconfig.WithRegion(a.Region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	a.cfg = &cfg
	return cfg, nil
}

// LoadConfig reads the config the way the functions do: inline from
// NODETIDE_CONFIG, from the file NODETIDE_CONFIG_FILE, or from the SSM
// parameter NODETIDE_CONFIG_PARAMETER.
func LoadConfig(ctx context.Context, getenv func(string) string, a *AWS) (*config.Config, error) {
	switch {
	case getenv(EnvConfig) != "":
		return config.Parse([]byte(getenv(EnvConfig)), EnvConfig)
	case getenv(EnvConfigFile) != "":
		return config.LoadFile(getenv(EnvConfigFile))
	case getenv(EnvConfigParameter) != "":
		name := getenv(EnvConfigParameter)
		cfg, err := a.Config(ctx)
		if err != nil {
			return nil, err
		}
		out, err := ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{Name: &name, WithDecryption: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("read config parameter %s: %w", name, err)
		}
		if out.Parameter == nil || out.Parameter.Value == nil {
			return nil, fmt.Errorf("config parameter %s has no value", name)
		}
		return config.Parse([]byte(*out.Parameter.Value), "ssm:"+name)
	}
	return nil, fmt.Errorf("no config: set %s, %s or %s", EnvConfig, EnvConfigFile, EnvConfigParameter)
}

// RESTConfig reaches the cluster the config names. kubeconfig, when set (the
// CLI's --kubeconfig), wins over the config.
func RESTConfig(ctx context.Context, cfg *config.Config, kubeconfig string, a *AWS) (*rest.Config, error) {
	k := cfg.Cluster.Kubernetes
	switch {
	case kubeconfig != "":
		return k8s.FromKubeconfigFile(kubeconfig, k.Context)
	case k.EKS != nil:
		ac, err := a.Config(ctx)
		if err != nil {
			return nil, err
		}
		if k.EKS.Region != "" {
			ac.Region = k.EKS.Region
		}
		return k8s.FromEKSConfig(ctx, ac, k.EKS.Name)
	case k.KubeconfigSecret != "":
		ac, err := a.Config(ctx)
		if err != nil {
			return nil, err
		}
		return k8s.FromKubeconfigSecret(ctx, secretsmanager.NewFromConfig(ac), k.KubeconfigSecret)
	case k.Kapsule != nil:
		return nil, fmt.Errorf("cluster.kubernetes.kapsule: reaching Kapsule clusters is not available yet; use kubeconfigSecret")
	case k.Kubeconfig != "":
		return k8s.FromKubeconfigFile(resolve(cfg.Dir, k.Kubeconfig), k.Context)
	default:
		return k8s.FromKubeconfigFile("", k.Context)
	}
}

func resolve(dir, path string) string {
	if dir == "" || strings.HasPrefix(path, "/") {
		return path
	}
	return dir + "/" + path
}

// Kubernetes returns a clientset for the cluster the config names.
func Kubernetes(ctx context.Context, cfg *config.Config, kubeconfig string, a *AWS) (kubernetes.Interface, error) {
	client, _, err := kubernetesClients(ctx, cfg, kubeconfig, a)
	return client, err
}

// kubernetesClients returns a clientset for the cluster the config names, and
// one for its bulk reads, which asks for protobuf (k8s.ReadConfig).
func kubernetesClients(ctx context.Context, cfg *config.Config, kubeconfig string, a *AWS) (client, reads kubernetes.Interface, err error) {
	rc, err := RESTConfig(ctx, cfg, kubeconfig, a)
	if err != nil {
		return nil, nil, err
	}
	rc.UserAgent = "nodetide"
	// client-go's defaults (5 QPS) would make a drain of a busy node crawl.
	rc.QPS, rc.Burst = 50, 100
	if client, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if reads, err = kubernetes.NewForConfig(k8s.ReadConfig(rc)); err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, reads, nil
}

// Overrides lists the schedule overrides of the cluster's node groups.
type Overrides func(ctx context.Context) ([]schedule.Override, error)

// NodeGroups returns a function listing every node group the config manages.
// Providers are built once (they may keep in-flight work in memory) and asked
// for their groups on each call, since discovery can find new groups. The
// overrides, read on every call when not nil, narrow the groups further: a
// fired schedule's min and max are what evaluate and drain keep to.
//
// With a guard, every size change of a group is made under the group's lock
// (providers.Guarded), so writers in different functions are serialised.
func NodeGroups(cfg *config.Config, client kubernetes.Interface, a *AWS, overrides Overrides, guard providers.Guard) func(context.Context) ([]providers.NodeGroup, error) {
	var mu sync.Mutex
	var built []entryProvider
	return func(ctx context.Context) ([]providers.NodeGroup, error) {
		mu.Lock()
		if built == nil {
			b, err := buildProviders(ctx, cfg, client, a)
			if err != nil {
				mu.Unlock()
				return nil, err
			}
			built = b
		}
		mu.Unlock()
		type listed struct {
			entry *entryProvider
			group providers.NodeGroup
		}
		var all []listed
		seen := map[string]string{}
		for i := range built {
			ep := &built[i]
			groups, err := ep.provider.NodeGroups(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ep.path, err)
			}
			for _, ng := range groups {
				if prev, dup := seen[ng.Name()]; dup {
					return nil, fmt.Errorf("%s: node group %q is also defined by %s", ep.path, ng.Name(), prev)
				}
				seen[ng.Name()] = ep.path
				all = append(all, listed{ep, ng})
			}
		}
		byGroup, err := readOverrides(ctx, overrides)
		if err != nil {
			return nil, err
		}
		out := make([]providers.NodeGroup, 0, len(all))
		for _, l := range all {
			g, err := narrow(l.group, l.entry, byGroup)
			if err != nil {
				return nil, err
			}
			if guard != nil {
				g = providers.Guarded(g, guard)
			}
			out = append(out, g)
		}
		return out, nil
	}
}

// guardOf is the group guard of a state store that keeps drains and leases
// (both stores do); holder names this process in the locks.
func guardOf(store any, holder string) providers.Guard {
	s, ok := store.(Stores)
	if !ok {
		return nil
	}
	return state.GroupGuard{Store: s, Holder: holder}
}

// overridesFrom reads the overrides from the state store when it keeps
// them (DynamoDB does; the in-memory store of one process keeps none).
func overridesFrom(store any) Overrides {
	if s, ok := store.(schedule.OverrideStore); ok {
		return s.Overrides
	}
	return nil
}

// readOverrides returns the schedule overrides by group (none without
// overrides). Failing to read them fails the listing: going on without
// them could grow a group past a schedule's max.
func readOverrides(ctx context.Context, overrides Overrides) (map[string]schedule.Override, error) {
	if overrides == nil {
		return nil, nil
	}
	list, err := overrides(ctx)
	if err != nil {
		return nil, fmt.Errorf("schedule overrides: %w", err)
	}
	byGroup := make(map[string]schedule.Override, len(list))
	for _, o := range list {
		byGroup[o.Group] = o
	}
	return byGroup, nil
}

// narrow is the one place a listed group's bounds are narrowed: by its
// config entry's bounds, then by the override of the schedule that last
// named it, each reporting itself as what set a bound it changed. The
// entry's price, when it sets one, replaces the provider's here too.
func narrow(g providers.NodeGroup, ep *entryProvider, overrides map[string]schedule.Override) (providers.NodeGroup, error) {
	g, err := ep.bounds.Narrow(g)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ep.path, err)
	}
	g = providers.Priced(g, ep.price)
	o, ok := overrides[g.Name()]
	if !ok || !o.Bounds() {
		return g, nil
	}
	own := g.Bounds()
	lo, hi, _ := schedule.EffectiveBounds(o, own.Min, own.Max)
	b := &providers.Narrowing{Min: &lo, Max: &hi, From: o.Source()}
	if g, err = b.Narrow(g); err != nil {
		return nil, fmt.Errorf("node group %s: %s: %w", o.Group, o.Source(), err)
	}
	return g, nil
}

// entryProvider is the provider of one nodeGroups entry.
type entryProvider struct {
	path     string
	provider providers.Provider
	// bounds are the entry's minSize/maxSize where nodetide narrows the
	// provider's groups by them (see configBounds).
	bounds *providers.Narrowing
	// price is the entry's price per node-hour; nil when it sets none.
	price *snapshot.Price
}

func buildProviders(ctx context.Context, cfg *config.Config, client kubernetes.Interface, a *AWS) ([]entryProvider, error) {
	out := make([]entryProvider, 0, len(cfg.NodeGroups))
	d := buildDeps(cfg, client, a)
	for i, g := range cfg.NodeGroups {
		path := fmt.Sprintf("nodeGroups[%d]", i)
		k, ok := config.ProviderKind(g.Provider)
		if !ok {
			return nil, fmt.Errorf("%s: provider %q is not available in this build yet", path, g.Provider)
		}
		p, err := k.Build(ctx, d, path, g.Entry())
		if err != nil {
			return nil, err
		}
		out = append(out, entryProvider{path: path, provider: p, bounds: configBounds(k, g), price: cfg.GroupPrice(i)})
	}
	return out, nil
}

// buildDeps are what every provider's build may use.
func buildDeps(cfg *config.Config, client kubernetes.Interface, a *AWS) providerkind.Deps {
	return providerkind.Deps{
		ClusterName: cfg.Cluster.Name,
		EKS:         cfg.Cluster.Kubernetes.EKS != nil,
		Dir:         cfg.Dir,
		Client:      client,
		AWS:         a.Config,
		Secret:      func(ctx context.Context, arn string) (string, error) { return secretString(ctx, a, arn) },
	}
}

// configBounds are the bounds nodetide narrows an entry's groups by: the
// entry's minSize/maxSize for a kind that leaves them to nodetide (see
// providerkind.Kind.NarrowedHere), none for the others.
func configBounds(k providerkind.Kind, g config.NodeGroup) *providers.Narrowing {
	if k.NarrowedHere {
		return providers.NewNarrowing(g.MinSize, g.MaxSize)
	}
	return providers.NewNarrowing(nil, nil)
}

// secretString reads a Secrets Manager secret's string; errors name the
// secret, never its value.
func secretString(ctx context.Context, a *AWS, arn string) (string, error) {
	ac, err := a.Config(ctx)
	if err != nil {
		return "", err
	}
	out, err := secretsmanager.NewFromConfig(ac).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", arn, err)
	}
	if out.SecretString == nil || *out.SecretString == "" {
		return "", fmt.Errorf("secret %s has no string value", arn)
	}
	return *out.SecretString, nil
}

// Stores is every store the functions keep in the state table.
type Stores interface {
	state.Store
	state.DrainStore
}

// Store returns the state store the config names.
func Store(ctx context.Context, cfg *config.Config, a *AWS) (Stores, error) {
	if cfg.State.Memory != nil {
		return state.NewMemory(cfg.Cluster.Name), nil
	}
	d := cfg.State.DynamoDB
	client, err := DynamoDBClient(ctx, d.Region, d.Endpoint, a)
	if err != nil {
		return nil, err
	}
	return state.NewDynamoDB(client, d.Table, cfg.Cluster.Name), nil
}

// DynamoDBClient builds a DynamoDB client; a loopback endpoint (a local
// DynamoDB implementation) gets placeholder credentials when none are set.
func DynamoDBClient(ctx context.Context, region, endpoint string, a *AWS) (*dynamodb.Client, error) {
	if endpoint != "" && isLoopback(endpoint) && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		if region == "" {
			region = "us-east-1"
		}
		return dynamodb.New(dynamodb.Options{
			Region:       region,
			BaseEndpoint: aws.String(endpoint),
			Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		}), nil
	}
	ac, err := a.Config(ctx)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) {
		if region != "" {
			o.Region = region
		}
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

func isLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "localhost" || strings.HasPrefix(h, "127.") || h == "::1"
}

// InstanceID names this process in leases: the function plus a random suffix.
func InstanceID(function string) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return fmt.Sprintf("%s-%d", function, os.Getpid())
	}
	return function + "-" + hex.EncodeToString(b)
}

// Evaluator wires the evaluate cycle a config describes, as the function, the
// CLI and the demo run it.
func Evaluator(ctx context.Context, cfg *config.Config, kubeconfig string, a *AWS, log *slog.Logger, holder string) (*evaluate.Evaluator, error) {
	client, reads, err := kubernetesClients(ctx, cfg, kubeconfig, a)
	if err != nil {
		return nil, err
	}
	store, err := Store(ctx, cfg, a)
	if err != nil {
		return nil, err
	}
	ev := &evaluate.Evaluator{
		Client: client,
		// Kept with the evaluator, so a warm function or a looping CLI
		// catches up with changes instead of listing everything again.
		Reader:   k8s.NewReader(reads, log),
		Groups:   NodeGroups(cfg, client, a, overridesFrom(store), guardOf(store, holder)),
		Store:    store,
		Settings: cfg.Settings(),
		Headroom: cfg.Headroom(),
		Log:      log,
		Holder:   holder,
		LeaseTTL: 2 * time.Minute,
		Shadow:   cfg.EvaluateSettings().Shadow,
	}
	if ps, ok := store.(state.PriceStore); ok {
		ev.Prices = &state.PriceCache{Store: ps}
	}
	if es := cfg.EvaluateSettings(); es.Compare {
		ev.Compare = &shadowcompare.Reader{Client: client, Namespace: es.CompareNamespace, Name: es.CompareName,
			StaleAfter: shadowcompare.DefaultStaleAfter}
	}
	if ns, name, ok := cfg.StatusConfigMapRef(); ok {
		ev.StatusMap = &statusmap.Writer{Client: client, Namespace: ns, Name: name, Cluster: cfg.Cluster.Name, Log: log}
	}
	if es := cfg.EventSettings(); es.Enabled {
		ev.Events = &kubeevents.Recorder{Client: client, Instance: holder, Log: log}
		ev.EventSettings = evaluate.EventSettings{MaxPodEventsPerCycle: es.MaxPodEventsPerCycle, NotTriggerScaleUpInterval: es.NotTriggerScaleUpInterval}
	}
	starter, err := Starter(ctx, cfg, store, a)
	if err != nil {
		return nil, err
	}
	if starter != nil {
		ev.Drainer = starter
		steps := &drain.Steps{Client: client, Groups: ev.Groups, Store: store, Log: log, Events: ev.Events}
		if usesAWS(cfg) {
			ac, err := a.Config(ctx)
			if err != nil {
				return nil, err
			}
			// Recovery asks EC2 whether a cordoned node's machine is going.
			_, steps.Machines = awsprovider.NewClients(ac)
		}
		ev.Recoverer = &drain.Recovery{Steps: steps, SFN: starter.SFN, StateMachineArn: starter.StateMachineArn}
	}
	return ev, nil
}

// Starter starts drain executions on the state machine named by
// NODETIDE_DRAIN_STATE_MACHINE_ARN (nil when unset). AWS_ENDPOINT_URL_SFN
// points it at a local Step Functions service.
func Starter(ctx context.Context, cfg *config.Config, store state.DrainStore, a *AWS) (*drain.Starter, error) {
	arn := os.Getenv(EnvDrainStateMachine)
	if arn == "" {
		return nil, nil
	}
	ac, err := a.Config(ctx)
	if err != nil {
		return nil, err
	}
	d := cfg.DrainSettings()
	return &drain.Starter{
		SFN: sfn.NewFromConfig(ac), StateMachineArn: arn, Store: store,
		Timeout: d.Timeout, Policy: d.OnTimeout, Surge: d.Surge,
	}, nil
}

// Drain wires the drain function: its steps, and the starter its shutdown
// action uses.
func Drain(ctx context.Context, cfg *config.Config, kubeconfig string, a *AWS, log *slog.Logger) (*drain.Handler, error) {
	client, err := Kubernetes(ctx, cfg, kubeconfig, a)
	if err != nil {
		return nil, err
	}
	store, err := Store(ctx, cfg, a)
	if err != nil {
		return nil, err
	}
	starter, err := Starter(ctx, cfg, store, a)
	if err != nil {
		return nil, err
	}
	steps := &drain.Steps{Client: client, Groups: NodeGroups(cfg, client, a, overridesFrom(store), guardOf(store, InstanceID("drain"))), Store: store, Log: log}
	if cfg.EventSettings().Enabled {
		steps.Events = &kubeevents.Recorder{Client: client, Instance: InstanceID("drain"), Log: log}
	}
	h := &drain.Handler{Steps: steps, Starter: starter, Rebalance: cfg.DrainSettings().Rebalance}
	if usesAWS(cfg) {
		ac, err := a.Config(ctx)
		if err != nil {
			return nil, err
		}
		// Completes and heartbeats the lifecycle actions of machines an
		// Auto Scaling Group terminates, of this deployment's hook only;
		// asks EC2 what the cloud's events claim of a machine.
		steps.Lifecycle, steps.Machines = awsprovider.NewClients(ac)
		steps.Hook = cfg.LifecycleHookName()
	}
	if starter == nil {
		h.Starter = &drain.Starter{SFN: noStateMachine{}, Store: store}
	} else {
		h.Recovery = &drain.Recovery{Steps: steps, SFN: starter.SFN, StateMachineArn: starter.StateMachineArn}
	}
	return h, nil
}

func usesAWS(cfg *config.Config) bool {
	for _, g := range cfg.NodeGroups {
		if g.Provider == "aws" {
			return true
		}
	}
	return false
}

// noStateMachine makes shutdown say what is missing instead of failing
// obscurely.
type noStateMachine struct{}

func (noStateMachine) StartExecution(context.Context, *sfn.StartExecutionInput, ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	return nil, fmt.Errorf("no drain state machine: set %s", EnvDrainStateMachine)
}

func (noStateMachine) DescribeExecution(context.Context, *sfn.DescribeExecutionInput, ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	return nil, fmt.Errorf("no drain state machine: set %s", EnvDrainStateMachine)
}

func (noStateMachine) StopExecution(context.Context, *sfn.StopExecutionInput, ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error) {
	return nil, fmt.Errorf("no drain state machine: set %s", EnvDrainStateMachine)
}
