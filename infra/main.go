// Command infra is nodetide's CDK app: one stack per cluster, built from its
// nodetide.yaml (context -c config=PATH, else NODETIDE_CONFIG_FILE, else
// ../nodetide.example.yaml). It is a module of its own so the CDK's large
// dependency tree never enters the Lambda builds. See README.md and docs/deploying.md.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodetide/nodetide/infra/stack"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	if err := build(app); err != nil {
		fmt.Fprintln(os.Stderr, "nodetide infra:", err)
		jsii.Close()
		os.Exit(1)
	}
	app.Synth(nil)
}

func build(app awscdk.App) error {
	opts, err := stack.LoadOptions(contextOf(app), os.Getenv)
	if err != nil {
		return err
	}
	name := opts.StackName
	if name == "" {
		name = stack.StackName(opts.Config.Cluster.Name)
	}
	props := &awscdk.StackProps{StackName: jsii.String(name)}
	if r := contextOf(app)(stack.CtxRegion); r != "" {
		// A region given is the stack's: cdk deploys it there.
		props.Env = &awscdk.Environment{Region: jsii.String(r)}
	}
	_, err = stack.New(app, name, props, opts)
	return err
}

// contextOf reads a context value as a string: lists (from cdk.json) are
// joined with commas.
func contextOf(app awscdk.App) func(string) string {
	return func(key string) string {
		switch v := app.Node().TryGetContext(jsii.String(key)).(type) {
		case nil:
			return ""
		case string:
			return v
		case []any:
			parts := make([]string, len(v))
			for i, p := range v {
				parts[i] = fmt.Sprint(p)
			}
			return strings.Join(parts, ",")
		default:
			return fmt.Sprint(v)
		}
	}
}
