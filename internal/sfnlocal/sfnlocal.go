// Package sfnlocal runs AWS Step Functions state machines on this machine,
// reachable through the real aws-sdk-go-v2 sfn client, with their Lambda
// tasks served by local Lambda Runtime Interface Emulators (RIE).
//
// Start launches, per Function, one or more RIEs running the function's
// bootstrap, and hack/sfn-local/server.mjs: a Node server speaking the Step
// Functions JSON 1.0 protocol that interprets definitions with
// aws-local-stepfunctions. The same ASL file CDK deploys runs here:
//
//   - Placeholders ${Key} in a definition file are replaced as CDK's
//     DefinitionSubstitutions do. Each Function fills ${<Name>FunctionArn}
//     (see FunctionArnKey: "drain" gives ${DrainFunctionArn}) with its ARN,
//     arn:aws:lambda:us-east-1:123456789012:function:<Name>; a StateMachine's
//     own Substitutions win over these. A placeholder left over is an error.
//   - A Task state whose Resource is a Lambda function ARN invokes the
//     function of that name on an idle RIE (queueing while all are busy).
//     A function error fails the task with the function's errorType as the
//     error name (aws-lambda-go reports a Go error's type name, so
//     `type DrainTimeout struct{…}` is matched by ErrorEquals
//     ["DrainTimeout"]) and, as on AWS, the function's error object as JSON
//     (errorMessage, errorType) as the cause. A function timeout is
//     Sandbox.Timedout; an RIE that can't be reached or answers garbage is
//     Lambda.ServiceException; a function name that isn't served is
//     Lambda.ResourceNotFoundException.
//   - Options.MaxWait caps every Wait state and every Retry pause, so a
//     loop that waits 10 s on AWS takes milliseconds in a test.
//
// Differences from the real service: state is in memory only and every
// state machine behaves as a STANDARD one; only Lambda function ARN task
// resources run (no arn:aws:states:::lambda:invoke or other integrations, no
// JSONata, no .waitForTaskToken, no HeartbeatSeconds); the context object
// has Execution (Id, Name, Input, StartTime, RoleArn) and StateMachine (Id,
// Name) but no State or Task fields; Wait states using SecondsPath or
// TimestampPath wait exactly MaxWait when it is set; a function answer made
// of nothing but errorType/errorMessage/stackTrace counts as an error (the
// RIE marks errors no other way); the history has Execution*,
// <Type>StateEntered, <Type>StateExited, LambdaFunction* and MapIteration*
// events only; IAM and quotas are not enforced. StartExecution follows AWS: the same name and
// input while the first execution runs returns it, anything else with a
// used name is ExecutionAlreadyExists, also after the execution ended.
package sfnlocal

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/nodetide/nodetide/internal/childproc"
)

const (
	// Region and AccountID are what every local ARN carries.
	Region    = "us-east-1"
	AccountID = "123456789012"

	// RIEVersion is the aws-lambda-rie that hack/testbed-build.sh installs.
	RIEVersion = "v0.0.0-20261030222936-bef5c4ba774d"

	// DefaultInstances is how many RIEs serve a function unless told.
	DefaultInstances = 2
	// DefaultTimeout is a function's timeout unless told; Lambda's own
	// default (3 s) is too short for anything that talks to a cluster.
	DefaultTimeout = 300 * time.Second

	modulePath   = "github.com/nodetide/nodetide"
	serverScript = "hack/sfn-local/server.mjs"
	// startTimeout bounds Start when ctx has no earlier deadline: node takes
	// a few seconds to load the interpreter on a busy 2-core machine.
	startTimeout = time.Minute
	// startAttempts covers losing a free port to another process between
	// finding it and the RIE binding it.
	startAttempts = 3
	// maxLogBytes caps each log FunctionLogs returns.
	maxLogBytes = 256 << 10
	// stopGrace is how long a child gets to exit on SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
	// logTailLines is how much of a child's log start-up errors quote.
	logTailLines = 30
)

// Function is a Lambda function served by local RIEs.
type Function struct {
	// Name is the function name, as in its ARN.
	Name string
	// Bootstrap is a built bootstrap for this machine's architecture (a
	// GOARCH=arm64 Lambda build doesn't run on amd64); build it with
	// `go build -tags lambda.norpc -o DIR/bootstrap ./functions/NAME`.
	Bootstrap string
	// Env is added to the function's environment (KEY=VALUE), after the
	// Lambda defaults Start sets (AWS_LAMBDA_FUNCTION_NAME, AWS_REGION,
	// dummy AWS credentials, …), so it can override them. Nothing else of
	// this process's environment is passed on, so a function can't reach a
	// real AWS account by accident.
	Env []string
	// Instances is how many RIEs serve the function at once (default 2). An
	// RIE runs one invocation at a time; more invocations queue.
	Instances int
	// Timeout is the function's timeout (default 300 s), after which its
	// invocation fails with Sandbox.Timedout.
	Timeout time.Duration
}

// StateMachine is a definition loaded at start-up.
type StateMachine struct {
	// Name is the state machine name, as in its ARN.
	Name string
	// DefinitionFile is the ASL JSON file, with ${Key} placeholders.
	DefinitionFile string
	// Substitutions maps placeholder keys (without ${}) to values; they
	// override the function ARNs filled in for every Function.
	Substitutions map[string]string
}

// Options configures Start.
type Options struct {
	Functions     []Function
	StateMachines []StateMachine
	// MaxWait caps every Wait state and Retry pause; 0 waits as defined.
	MaxWait time.Duration
	// Root is the repository root, holding hack/sfn-local and node_modules;
	// empty finds it from the working directory.
	Root string
}

// Service is a running local Step Functions endpoint and its functions.
type Service struct {
	// Endpoint is the base URL for the sfn client, http://127.0.0.1:PORT.
	Endpoint string
	// StateMachineArn maps each Options.StateMachines name to its ARN.
	StateMachineArn map[string]string
	// FunctionArn maps each Options.Functions name to its ARN.
	FunctionArn map[string]string

	dir       string
	server    *childproc.Process
	functions map[string][]*childproc.Process
	procs     []*childproc.Process // in stop order: the server first, so no new invocations start

	stopOnce sync.Once
	stopErr  error
	cleanup  []func()
}

// FunctionArnKey is the substitution key that carries a function's ARN:
// the name in CamelCase plus "FunctionArn" ("drain" → "DrainFunctionArn",
// "nodetide-drain" → "NodetideDrainFunctionArn").
func FunctionArnKey(name string) string {
	var b strings.Builder
	upper := true
	for _, r := range name {
		if !isAlnum(r) {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return b.String() + "FunctionArn"
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// validFunctionName applies Lambda's rule for function names.
func validFunctionName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !isAlnum(r) && r != '-' && r != '_' {
			return false
		}
	}
	return true
}

// FunctionARN is the ARN Task states use to reach the local function name.
func FunctionARN(name string) string {
	return "arn:aws:lambda:" + Region + ":" + AccountID + ":function:" + name
}

// StateMachineARN is the ARN of the local state machine name.
func StateMachineARN(name string) string {
	return "arn:aws:states:" + Region + ":" + AccountID + ":stateMachine:" + name
}

// Start runs the functions' RIEs and the Step Functions server and returns
// once they all answer. It builds nothing: the RIE comes from the cache
// `make testbed` fills, the interpreter from the repository's node_modules
// (`npm ci`). ctx bounds the start only; everything runs until Stop (or
// until this process dies: the children get SIGKILL then).
func Start(ctx context.Context, opts Options) (*Service, error) {
	t, err := findTools(opts)
	if err != nil {
		return nil, fmt.Errorf("sfnlocal: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()

	dir, err := os.MkdirTemp("", "nodetide-sfnlocal-*")
	if err != nil {
		return nil, fmt.Errorf("sfnlocal: temp dir: %w", err)
	}
	s := &Service{
		StateMachineArn: make(map[string]string),
		FunctionArn:     make(map[string]string),
		dir:             dir,
		functions:       make(map[string][]*childproc.Process),
	}
	fail := func(err error) (*Service, error) {
		if stopErr := s.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, fmt.Errorf("sfnlocal: %w", err)
	}

	cfg := serverConfig{
		Region:        Region,
		AccountID:     AccountID,
		Functions:     make(map[string]serverFunction),
		StateMachines: []serverStateMachine{},
	}
	if opts.MaxWait > 0 {
		w := opts.MaxWait.Seconds()
		cfg.WaitSecondsMax = &w
	}
	fnSubs, err := s.startFunctions(ctx, t.rie, opts.Functions, &cfg)
	if err != nil {
		return fail(err)
	}
	if err := s.addStateMachines(opts.StateMachines, fnSubs, &cfg); err != nil {
		return fail(err)
	}
	cfgPath, err := writeServerConfig(dir, cfg)
	if err != nil {
		return fail(err)
	}

	server, endpoint, err := startServer(ctx, t.node, t.script, t.root, cfgPath, filepath.Join(dir, "server.log"))
	if server != nil {
		// First in stop order: no new invocations once stopping begins.
		s.server = server
		s.procs = append([]*childproc.Process{server}, s.procs...)
	}
	if err != nil {
		return fail(err)
	}
	s.Endpoint = endpoint
	return s, nil
}

// tools are what Start runs: the repository's server script under node, and
// the RIE when there are functions.
type tools struct {
	root, script, node, rie string
}

// findTools checks the options and finds the tools, before anything starts.
func findTools(opts Options) (tools, error) {
	if err := opts.check(); err != nil {
		return tools{}, err
	}
	t := tools{root: opts.Root}
	if t.root == "" {
		var err error
		if t.root, err = repoRoot(); err != nil {
			return tools{}, err
		}
	}
	t.script = filepath.Join(t.root, serverScript)
	if _, err := os.Stat(t.script); err != nil {
		return tools{}, fmt.Errorf("server script: %w", err)
	}
	if err := checkNodeModules(t.root, "aws-local-stepfunctions"); err != nil {
		return tools{}, err
	}
	var err error
	if t.node, err = exec.LookPath("node"); err != nil {
		return tools{}, fmt.Errorf("node (Node.js 20 or later) is not on PATH: %w", err)
	}
	if len(opts.Functions) > 0 {
		if t.rie, err = RIEPath(); err != nil {
			return tools{}, err
		}
	}
	return t, nil
}

// startFunctions starts each function's RIEs, adds the functions to the
// server's config and returns the ARN substitutions state machines get.
func (s *Service) startFunctions(ctx context.Context, rie string, functions []Function, cfg *serverConfig) (map[string]string, error) {
	fnSubs := make(map[string]string)
	for _, f := range functions {
		f = f.withDefaults()
		var endpoints []string
		for i := range f.Instances {
			p, endpoint, err := startRIE(ctx, rie, f, i, s.dir)
			if err != nil {
				return nil, err
			}
			s.functions[f.Name] = append(s.functions[f.Name], p)
			s.procs = append(s.procs, p)
			endpoints = append(endpoints, endpoint)
		}
		cfg.Functions[f.Name] = serverFunction{Endpoints: endpoints, TimeoutSeconds: timeoutSeconds(f.Timeout)}
		s.FunctionArn[f.Name] = FunctionARN(f.Name)
		fnSubs[FunctionArnKey(f.Name)] = FunctionARN(f.Name)
	}
	return fnSubs, nil
}

// addStateMachines adds the state machines to the server's config, each
// with the function ARNs and its own substitutions.
func (s *Service) addStateMachines(machines []StateMachine, fnSubs map[string]string, cfg *serverConfig) error {
	for _, sm := range machines {
		file, err := filepath.Abs(sm.DefinitionFile)
		if err != nil {
			return fmt.Errorf("state machine %s: %w", sm.Name, err)
		}
		subs := make(map[string]string, len(fnSubs)+len(sm.Substitutions))
		maps.Copy(subs, fnSubs)
		maps.Copy(subs, sm.Substitutions)
		cfg.StateMachines = append(cfg.StateMachines, serverStateMachine{Name: sm.Name, DefinitionFile: file, Substitutions: subs})
		s.StateMachineArn[sm.Name] = StateMachineARN(sm.Name)
	}
	return nil
}

// writeServerConfig writes the server's config into dir and returns its
// path.
func writeServerConfig(dir string, cfg serverConfig) (string, error) {
	path := filepath.Join(dir, "config.json")
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", fmt.Errorf("server config: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return "", fmt.Errorf("server config: %w", err)
	}
	return path, nil
}

func (o Options) check() error {
	if o.MaxWait < 0 {
		return fmt.Errorf("MaxWait %v is negative", o.MaxWait)
	}
	seen := make(map[string]bool)
	for _, f := range o.Functions {
		if !validFunctionName(f.Name) {
			return fmt.Errorf("function name %q: want 1-64 letters, digits, - or _", f.Name)
		}
		if seen[f.Name] {
			return fmt.Errorf("function %s given twice", f.Name)
		}
		seen[f.Name] = true
		if f.Instances < 0 || f.Timeout < 0 {
			return fmt.Errorf("function %s: negative Instances or Timeout", f.Name)
		}
		if err := checkBootstrap(f.Bootstrap); err != nil {
			return fmt.Errorf("function %s: %w", f.Name, err)
		}
	}
	seen = make(map[string]bool)
	for _, sm := range o.StateMachines {
		if sm.Name == "" || seen[sm.Name] {
			return fmt.Errorf("state machine name %q is empty or given twice", sm.Name)
		}
		seen[sm.Name] = true
		if _, err := os.Stat(sm.DefinitionFile); err != nil {
			return fmt.Errorf("state machine %s: %w", sm.Name, err)
		}
	}
	return nil
}

func (f Function) withDefaults() Function {
	if f.Instances == 0 {
		f.Instances = DefaultInstances
	}
	if f.Timeout == 0 {
		f.Timeout = DefaultTimeout
	}
	return f
}

// timeoutSeconds rounds up: the RIE takes whole seconds.
func timeoutSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// checkBootstrap catches the usual mistakes early: a missing or
// non-executable file, or an ELF binary for another architecture (the
// functions' Lambda builds are arm64).
func checkBootstrap(path string) error {
	if path == "" {
		return errors.New("no Bootstrap")
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("bootstrap %s is not an executable file", path)
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil // a script, say: the RIE runs it as it is
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if want != elf.EM_NONE && f.Machine != want {
		return fmt.Errorf("bootstrap %s is built for %v, this machine is %s: build it without GOARCH=arm64", path, f.Machine, runtime.GOARCH)
	}
	return nil
}

// RIEPath locates aws-lambda-rie: $NODETIDE_RIE, else the cache
// hack/testbed-build.sh installs it into.
func RIEPath() (string, error) {
	path := os.Getenv("NODETIDE_RIE")
	if path == "" {
		cache := os.Getenv("NODETIDE_CACHE")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("locate aws-lambda-rie: %w (set NODETIDE_RIE)", err)
			}
			cache = filepath.Join(home, ".cache", "nodetide")
		}
		path = filepath.Join(cache, "testbed", "aws-lambda-rie-"+RIEVersion, "aws-lambda-rie")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("aws-lambda-rie missing (%w): run `make testbed` (hack/testbed-build.sh) once to install it", err)
	}
	return path, nil
}

// startRIE runs one RIE instance of f on free loopback ports and returns its
// base URL once it listens.
func startRIE(ctx context.Context, rie string, f Function, index int, dir string) (*childproc.Process, string, error) {
	bootstrap, err := filepath.Abs(f.Bootstrap)
	if err != nil {
		return nil, "", fmt.Errorf("function %s: %w", f.Name, err)
	}
	name := fmt.Sprintf("%s-%d", f.Name, index)
	logPath := filepath.Join(dir, "function-"+name+".log")
	for attempt := 1; ; attempt++ {
		ports, err := childproc.FreePorts(2)
		if err != nil {
			return nil, "", fmt.Errorf("function %s: %w", f.Name, err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(ports[0])
		cmd := exec.Command(rie,
			"--runtime-interface-emulator-address", addr,
			// Every instance needs its own runtime API port: the default,
			// 9001, would collide.
			"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(ports[1]),
			bootstrap)
		cmd.Dir = filepath.Dir(bootstrap) // Lambda runs in the code's directory
		cmd.Env = append(lambdaEnv(f, name), f.Env...)
		// Attempts share the log, so a failure after a retry shows both.
		p, err := childproc.Start(ctx, "aws-lambda-rie "+name, cmd, childproc.Options{Log: logPath})
		if err != nil {
			return nil, "", fmt.Errorf("function %s: %w", f.Name, err)
		}
		// The error quotes the end of the log.
		err = p.WaitListening(ctx, addr)
		if err == nil {
			return p, "http://" + addr, nil
		}
		stopErr := p.Stop(context.Background(), stopGrace)
		if attempt < startAttempts && ctx.Err() == nil && strings.Contains(p.LogTail(logTailLines), "address already in use") {
			continue
		}
		return nil, "", fmt.Errorf("function %s: %w", f.Name, errors.Join(err, stopErr))
	}
}

// lambdaEnv is what Lambda sets for a function (those the Go runtime and
// SDKs read), with dummy credentials in place of the execution role's.
func lambdaEnv(f Function, instance string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"TZ=:UTC",
		"LANG=en_US.UTF-8",
		"AWS_REGION=" + Region,
		"AWS_DEFAULT_REGION=" + Region,
		"AWS_LAMBDA_FUNCTION_NAME=" + f.Name,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(timeoutSeconds(f.Timeout)),
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/" + f.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME=local/" + instance,
		"AWS_ACCESS_KEY_ID=sfnlocal",
		"AWS_SECRET_ACCESS_KEY=sfnlocal",
		"_HANDLER=bootstrap",
	}
}

// startServer runs server.mjs on a port of its own choosing (so no port can
// be lost to another process) and returns its endpoint from the line it
// prints once it serves.
func startServer(ctx context.Context, node, script, root, cfgPath, logPath string) (*childproc.Process, string, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, "", fmt.Errorf("start server: %w", err)
	}
	cmd := exec.Command(node, script, "--config", cfgPath, "--host", "127.0.0.1", "--port", "0")
	cmd.Dir = root
	cmd.Stdout = pw
	// Its stderr goes to the log; its stdout, read below, is copied there.
	p, err := childproc.Start(ctx, "sfn-local server", cmd, childproc.Options{Log: logPath})
	pw.Close() // the child has its own copy; EOF on pr once it exits
	if err != nil {
		pr.Close()
		return nil, "", err
	}
	endpoint := make(chan string, 1)
	go func() {
		defer pr.Close()
		logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			_, _ = io.Copy(io.Discard, pr)
			return
		}
		defer logFile.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, "listening on "); ok {
				select {
				case endpoint <- strings.TrimSpace(u):
				default:
				}
			}
			fmt.Fprintln(logFile, line)
		}
	}()
	select {
	case u := <-endpoint:
		return p, u, nil
	case <-p.Done():
		return p, "", fmt.Errorf("sfn-local server exited (%v); log:\n%s", p.State(), p.LogTail(logTailLines))
	case <-ctx.Done():
		return p, "", fmt.Errorf("sfn-local server not listening: %w; log:\n%s", ctx.Err(), p.LogTail(logTailLines))
	}
}

// Stop ends the server and every RIE with their process groups and removes
// the temporary files, logs included. Calling it again returns the first
// call's result.
func (s *Service) Stop() error {
	s.stopOnce.Do(func() {
		// All at once: they share one grace period.
		err := childproc.StopAll(context.Background(), stopGrace, s.procs...)
		for _, c := range s.cleanup {
			c()
		}
		if rmErr := os.RemoveAll(s.dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", s.dir, rmErr))
		}
		if err != nil {
			s.stopErr = fmt.Errorf("sfnlocal: stop: %w", err)
		}
	})
	return s.stopErr
}

// Client returns a Step Functions client for this service: the real SDK
// client with BaseEndpoint set, dummy static credentials and region
// us-east-1, reading nothing from the environment or ~/.aws so it can never
// reach a real account. ctx is unused: nothing is loaded to build it.
func (s *Service) Client(_ context.Context) *sfn.Client {
	return sfn.New(sfn.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("sfnlocal", "sfnlocal", ""),
	})
}

// FunctionLogs returns what the function's RIEs and bootstraps wrote (each
// instance's last 256 KiB), for test failure messages. The logs are gone
// after Stop.
func (s *Service) FunctionLogs(name string) string {
	procs, ok := s.functions[name]
	if !ok {
		return fmt.Sprintf("(no function %q)", name)
	}
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "--- %s ---\n%s", p.Name(), readLog(p.LogPath()))
	}
	return b.String()
}

// ServerLog returns what the Step Functions server wrote.
func (s *Service) ServerLog() string {
	if s.server == nil {
		return "(no server)"
	}
	return readLog(s.server.LogPath())
}

// PIDs lists the process ids of the server and every RIE (each also the id
// of its process group, which holds the RIE's bootstrap), for checks that
// nothing outlives Stop.
func (s *Service) PIDs() []int {
	return pids(s.procs)
}

// FunctionPIDs lists the process ids of the RIEs serving the function name.
func (s *Service) FunctionPIDs(name string) []int {
	return pids(s.functions[name])
}

func pids(procs []*childproc.Process) []int {
	out := make([]int, 0, len(procs))
	for _, p := range procs {
		out = append(out, p.PID())
	}
	return out
}

func readLog(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)\n", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxLogBytes {
		_, _ = f.Seek(-maxLogBytes, io.SeekEnd)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)\n", err)
	}
	return string(b)
}

type serverConfig struct {
	Region         string                    `json:"region"`
	AccountID      string                    `json:"accountId"`
	WaitSecondsMax *float64                  `json:"waitSecondsMax,omitempty"`
	Functions      map[string]serverFunction `json:"functions"`
	StateMachines  []serverStateMachine      `json:"stateMachines"`
}

type serverFunction struct {
	Endpoints      []string `json:"endpoints"`
	TimeoutSeconds int      `json:"timeoutSeconds"`
}

type serverStateMachine struct {
	Name           string            `json:"name"`
	DefinitionFile string            `json:"definitionFile"`
	Substitutions  map[string]string `json:"substitutions"`
}

// checkNodeModules tells whether the repository's npm packages are
// installed, naming the fix when not.
func checkNodeModules(root, pkg string) error {
	dir := filepath.Join(root, "node_modules", pkg)
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		return fmt.Errorf("npm package %s is missing (run `npm ci` in %s): %w", pkg, root, err)
	}
	return nil
}

// repoRoot walks up from the working directory to the directory whose
// go.mod declares this module (infra/ has a go.mod of its own).
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for dir := wd; ; {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && declaresModule(string(b), modulePath) {
			return dir, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("find repository root: %w", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no go.mod of module %s at or above %s (set Options.Root)", modulePath, wd)
		}
		dir = parent
	}
}

func declaresModule(gomod, path string) bool {
	for line := range strings.Lines(gomod) {
		line, _, _ = strings.Cut(line, "//")
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], "\"`") == path
		}
	}
	return false
}
