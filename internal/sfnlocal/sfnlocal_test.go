package sfnlocal_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/nodetide/nodetide/internal/sfnlocal"
	"github.com/nodetide/nodetide/internal/testbed"
)

func TestMain(m *testing.M) { testbed.Main(m) }

// maxWait caps the toy's 10 s Wait and its 2 s/4 s retry backoff.
const maxWait = 50 * time.Millisecond

// buildToy builds testdata/toyfn for this machine, as Functions need.
func buildToy(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", out, "./testdata/toyfn")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build toyfn: %v\n%s", err, b)
	}
	return out
}

// toy is one run of the toy state machine: its job, and the test's view of
// the service.
type toy struct {
	t      *testing.T
	svc    *sfnlocal.Service
	client *sfn.Client
	smArn  string
}

// job is the toy function's input (see testdata/toyfn).
type job struct {
	ID          string `json:"id"`
	Loops       int    `json:"loops"`
	FailAt      string `json:"failAt,omitempty"`
	FailWith    string `json:"failWith,omitempty"`
	FailTimes   int    `json:"failTimes,omitempty"`
	CounterFile string `json:"counterFile,omitempty"`
	SleepMillis int    `json:"sleepMillis,omitempty"`
	Exit        string `json:"exit,omitempty"`
}

func input(t *testing.T, j job) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"job": j})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (x *toy) start(ctx context.Context, name, in string) string {
	x.t.Helper()
	out, err := x.client.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(x.smArn),
		Name:            aws.String(name),
		Input:           aws.String(in),
	})
	if err != nil {
		x.t.Fatalf("StartExecution %s: %v", name, err)
	}
	return aws.ToString(out.ExecutionArn)
}

// wait polls until the execution ends.
func (x *toy) wait(ctx context.Context, arn string) *sfn.DescribeExecutionOutput {
	x.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := x.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
		if err != nil {
			x.t.Fatalf("DescribeExecution: %v", err)
		}
		if out.Status != types.ExecutionStatusRunning {
			return out
		}
		if time.Now().After(deadline) {
			x.fatalf("execution %s still running after a minute", arn)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (x *toy) run(ctx context.Context, name string, j job) *sfn.DescribeExecutionOutput {
	x.t.Helper()
	return x.wait(ctx, x.start(ctx, name, input(x.t, j)))
}

// waitIdle polls until every invocation of the toy function for job id has
// ended: in an RIE's log, the START RequestId line before the job's own
// line has its END. (A step that exits the process never logs its END, so
// other jobs' invocations are not counted.)
func (x *toy) waitIdle(id string) {
	x.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		logs := x.svc.FunctionLogs("toy")
		busy, req := false, ""
		for line := range strings.Lines(logs) {
			if r, ok := strings.CutPrefix(line, "START RequestId: "); ok {
				req, _, _ = strings.Cut(r, " ")
			}
			if strings.HasPrefix(line, "toyfn: job "+id+" step ") && !strings.Contains(logs, "END RequestId: "+req+"\n") {
				busy = true
			}
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			x.fatalf("job %s's invocations still running after a minute", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fatalf fails the test with the logs that explain it.
func (x *toy) fatalf(format string, args ...any) {
	x.t.Helper()
	x.t.Fatalf(format+"\nserver log:\n%s\nfunction logs:\n%s", append(args, x.svc.ServerLog(), x.svc.FunctionLogs("toy"))...)
}

func (x *toy) history(ctx context.Context, arn string) []types.HistoryEvent {
	x.t.Helper()
	var events []types.HistoryEvent
	p := sfn.NewGetExecutionHistoryPaginator(x.client, &sfn.GetExecutionHistoryInput{
		ExecutionArn: aws.String(arn),
		MaxResults:   7, // several pages, so paging is exercised
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			x.t.Fatalf("GetExecutionHistory: %v", err)
		}
		events = append(events, page.Events...)
	}
	return events
}

// entered lists the states entered, in order.
func entered(events []types.HistoryEvent) []string {
	var names []string
	for _, e := range events {
		if e.StateEnteredEventDetails != nil {
			names = append(names, aws.ToString(e.StateEnteredEventDetails.Name))
		}
	}
	return names
}

func count(events []types.HistoryEvent, typ types.HistoryEventType) int {
	n := 0
	for _, e := range events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func TestStateMachines(t *testing.T) {
	testbed.Integration(t, "the local Step Functions service with functions under the Lambda RIE")
	ctx := t.Context()
	bootstrap := buildToy(t)

	begin := time.Now()
	svc, err := sfnlocal.Start(ctx, sfnlocal.Options{
		Functions: []sfnlocal.Function{
			{Name: "toy", Bootstrap: bootstrap, Env: []string{"TOY_MODE=test"}},
			{Name: "lost", Bootstrap: bootstrap, Instances: 1},
			{Name: "slow", Bootstrap: bootstrap, Instances: 1, Timeout: time.Second},
		},
		StateMachines: []sfnlocal.StateMachine{
			{Name: "toy", DefinitionFile: "testdata/toy.asl.json"},
			{Name: "lost", DefinitionFile: "testdata/lost.asl.json"},
			// The same definition on another function: explicit
			// substitutions win over the ones filled in per function.
			{Name: "slow", DefinitionFile: "testdata/toy.asl.json",
				Substitutions: map[string]string{"ToyFunctionArn": sfnlocal.FunctionARN("slow")}},
		},
		MaxWait: maxWait,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("start-up (4 RIEs, server with 3 state machines): %v", time.Since(begin).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := svc.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if !strings.HasPrefix(svc.Endpoint, "http://127.0.0.1:") {
		t.Fatalf("Endpoint = %q", svc.Endpoint)
	}
	if got, want := svc.StateMachineArn["toy"], "arn:aws:states:us-east-1:123456789012:stateMachine:toy"; got != want {
		t.Fatalf("StateMachineArn[toy] = %q, want %q", got, want)
	}
	if got, want := svc.FunctionArn["toy"], "arn:aws:lambda:us-east-1:123456789012:function:toy"; got != want {
		t.Fatalf("FunctionArn[toy] = %q, want %q", got, want)
	}
	x := &toy{t: t, svc: svc, client: svc.Client(ctx), smArn: svc.StateMachineArn["toy"]}

	// The subtests share the service and run one after another, so each
	// sees idle RIEs (the concurrency check depends on it).
	t.Run("Succeeds", func(t *testing.T) {
		x := *x
		x.t = t
		begin := time.Now()
		out := x.run(ctx, "succeeds", job{ID: "a", Loops: 1})
		t.Logf("4-state execution (3 Lambda tasks): %v", time.Since(begin).Round(time.Millisecond))
		if out.Status != types.ExecutionStatusSucceeded {
			x.fatalf("status %s (%s: %s)", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
		}
		var got struct {
			Job      job `json:"job"`
			Progress struct {
				Remaining int    `json:"remaining"`
				Function  string `json:"function"`
			} `json:"progress"`
			Finish struct {
				Step string `json:"step"`
			} `json:"finish"`
		}
		if err := json.Unmarshal([]byte(aws.ToString(out.Output)), &got); err != nil {
			t.Fatalf("output %q: %v", aws.ToString(out.Output), err)
		}
		if got.Job.ID != "a" || got.Progress.Remaining != 0 || got.Progress.Function != "toy" || got.Finish.Step != "finish" {
			t.Errorf("output = %s", aws.ToString(out.Output))
		}
		if aws.ToString(out.Input) != input(t, job{ID: "a", Loops: 1}) || aws.ToString(out.Name) != "succeeds" ||
			aws.ToString(out.StateMachineArn) != x.smArn {
			t.Errorf("describe = input %q name %q state machine %q", aws.ToString(out.Input), aws.ToString(out.Name), aws.ToString(out.StateMachineArn))
		}
		if out.StartDate == nil || out.StopDate == nil || out.StopDate.Before(*out.StartDate) ||
			time.Since(*out.StartDate) > time.Minute {
			t.Errorf("startDate %v stopDate %v", out.StartDate, out.StopDate)
		}

		events := x.history(ctx, aws.ToString(out.ExecutionArn))
		if got, want := strings.Join(entered(events), " "), "Prepare Work MoreWork Finish"; got != want {
			t.Errorf("states entered: %s, want %s", got, want)
		}
		if events[0].Type != types.HistoryEventTypeExecutionStarted || events[len(events)-1].Type != types.HistoryEventTypeExecutionSucceeded {
			t.Errorf("history runs from %s to %s", events[0].Type, events[len(events)-1].Type)
		}
		for i, e := range events {
			if e.Id != int64(i+1) || e.Timestamp == nil || e.Timestamp.Before(*out.StartDate) {
				t.Errorf("event %d: id %d timestamp %v", i, e.Id, e.Timestamp)
			}
		}
		// Each Task: entered, Lambda scheduled, started, succeeded, exited.
		if got := count(events, types.HistoryEventTypeLambdaFunctionSucceeded); got != 3 {
			t.Errorf("%d LambdaFunctionSucceeded events, want 3", got)
		}
		for i, e := range events {
			if e.Type == types.HistoryEventTypeLambdaFunctionScheduled {
				prev := events[i-1]
				if prev.Type != types.HistoryEventTypeTaskStateEntered && prev.Type != types.HistoryEventTypeLambdaFunctionFailed {
					t.Errorf("LambdaFunctionScheduled follows %s", prev.Type)
				}
				if got := aws.ToString(e.LambdaFunctionScheduledEventDetails.Resource); got != svc.FunctionArn["toy"] {
					t.Errorf("scheduled resource %s", got)
				}
			}
		}
		rev, err := x.client.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{
			ExecutionArn: out.ExecutionArn, ReverseOrder: true, MaxResults: 1, IncludeExecutionData: aws.Bool(false),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(rev.Events) != 1 || rev.NextToken == nil || rev.Events[0].Type != types.HistoryEventTypeExecutionSucceeded ||
			rev.Events[0].ExecutionSucceededEventDetails.Output != nil {
			t.Errorf("reverse, 1 event, no data: %+v next %v", rev.Events, rev.NextToken)
		}
	})

	t.Run("WaitLoopIsCapped", func(t *testing.T) {
		x := *x
		x.t = t
		begin := time.Now()
		out := x.run(ctx, "wait-loop", job{ID: "w", Loops: 3})
		took := time.Since(begin)
		t.Logf("10-state execution with two 10 s Waits capped at %v: %v", maxWait, took.Round(time.Millisecond))
		if out.Status != types.ExecutionStatusSucceeded {
			x.fatalf("status %s (%s: %s)", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
		}
		if took > 10*time.Second {
			t.Errorf("took %v: the 10 s Waits were not capped", took)
		}
		events := x.history(ctx, aws.ToString(out.ExecutionArn))
		if got, want := strings.Join(entered(events), " "), "Prepare Work MoreWork Pause Work MoreWork Pause Work MoreWork Finish"; got != want {
			t.Errorf("states entered: %s\nwant %s", got, want)
		}
		if got := count(events, types.HistoryEventTypeWaitStateEntered); got != 2 {
			t.Errorf("%d WaitStateEntered events, want 2", got)
		}
	})

	t.Run("RetriesTransientThenSucceeds", func(t *testing.T) {
		x := *x
		x.t = t
		counter := filepath.Join(t.TempDir(), "count")
		begin := time.Now()
		out := x.run(ctx, "retries", job{ID: "r", Loops: 1, FailAt: "work", FailWith: "Transient", FailTimes: 2, CounterFile: counter})
		took := time.Since(begin)
		if out.Status != types.ExecutionStatusSucceeded {
			x.fatalf("status %s (%s: %s)", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
		}
		if took > 5*time.Second {
			t.Errorf("took %v: the 2 s + 4 s retry backoff was not capped", took)
		}
		if b, err := os.ReadFile(counter); err != nil || string(b) != "3" {
			t.Errorf("work ran %q times (%v), want 3", b, err)
		}
		events := x.history(ctx, aws.ToString(out.ExecutionArn))
		var failures []string
		for _, e := range events {
			if d := e.LambdaFunctionFailedEventDetails; d != nil {
				failures = append(failures, aws.ToString(d.Error))
				if !strings.Contains(aws.ToString(d.Cause), "transient failure in step work") {
					t.Errorf("failure cause %q", aws.ToString(d.Cause))
				}
			}
		}
		if strings.Join(failures, " ") != "Transient Transient" {
			t.Errorf("Lambda failures %v, want two Transient", failures)
		}
	})

	t.Run("RetriesExhaustedFailsWithTypedError", func(t *testing.T) {
		x := *x
		x.t = t
		out := x.run(ctx, "exhausted", job{ID: "x", Loops: 1, FailAt: "prepare", FailWith: "Transient"})
		if out.Status != types.ExecutionStatusFailed || aws.ToString(out.Error) != "Transient" {
			x.fatalf("status %s error %q, want FAILED Transient", out.Status, aws.ToString(out.Error))
		}
		events := x.history(ctx, aws.ToString(out.ExecutionArn))
		if got := count(events, types.HistoryEventTypeLambdaFunctionFailed); got != 4 {
			t.Errorf("%d Lambda failures, want 4 (MaxAttempts 3 retries)", got)
		}
		if last := events[len(events)-1]; last.Type != types.HistoryEventTypeExecutionFailed ||
			aws.ToString(last.ExecutionFailedEventDetails.Error) != "Transient" {
			t.Errorf("last event %s", last.Type)
		}
	})

	t.Run("CatchRollsBackAndFails", func(t *testing.T) {
		x := *x
		x.t = t
		out := x.run(ctx, "rollback", job{ID: "f", Loops: 2, FailAt: "work", FailWith: "Fatal"})
		if out.Status != types.ExecutionStatusFailed || aws.ToString(out.Error) != "ToyFailed" {
			x.fatalf("status %s error %q, want FAILED ToyFailed", out.Status, aws.ToString(out.Error))
		}
		// The cause is the function's error object, as Step Functions
		// passes it on.
		var cause struct{ ErrorMessage, ErrorType string }
		if err := json.Unmarshal([]byte(aws.ToString(out.Cause)), &cause); err != nil ||
			cause.ErrorType != "Fatal" || cause.ErrorMessage != "fatal failure in step work" {
			t.Errorf("cause %q (%v)", aws.ToString(out.Cause), err)
		}
		if out.Output != nil {
			t.Errorf("a failed execution has output %q", aws.ToString(out.Output))
		}
		events := x.history(ctx, aws.ToString(out.ExecutionArn))
		if got, want := strings.Join(entered(events), " "), "Prepare Work Rollback Failed"; got != want {
			t.Errorf("states entered: %s, want %s", got, want)
		}
		if got := count(events, types.HistoryEventTypeFailStateEntered); got != 1 {
			t.Errorf("%d FailStateEntered events", got)
		}
	})

	t.Run("CrashIsRuntimeExitError", func(t *testing.T) {
		x := *x
		x.t = t
		out := x.run(ctx, "crash", job{ID: "c", Loops: 1, Exit: "finish"})
		if out.Status != types.ExecutionStatusFailed || aws.ToString(out.Error) != "Runtime.ExitError" {
			x.fatalf("status %s error %q, want FAILED Runtime.ExitError", out.Status, aws.ToString(out.Error))
		}
	})

	t.Run("UnreachableFunctionIsServiceException", func(t *testing.T) {
		pids := svc.FunctionPIDs("lost")
		if len(pids) != 1 {
			t.Fatalf("lost runs on %d RIEs, want 1", len(pids))
		}
		if err := syscall.Kill(-pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		x := *x
		x.t = t
		x.smArn = svc.StateMachineArn["lost"]
		out := x.run(ctx, "lost", job{ID: "l"})
		if out.Status != types.ExecutionStatusFailed || aws.ToString(out.Error) != "Lambda.ServiceException" {
			x.fatalf("status %s error %q, want FAILED Lambda.ServiceException", out.Status, aws.ToString(out.Error))
		}
		events := x.history(ctx, aws.ToString(out.ExecutionArn))
		if got := count(events, types.HistoryEventTypeLambdaFunctionFailed); got != 2 {
			t.Errorf("%d Lambda failures, want 2 (one retry)", got)
		}
	})

	t.Run("FunctionTimeoutIsSandboxTimedout", func(t *testing.T) {
		x := *x
		x.t = t
		x.smArn = svc.StateMachineArn["slow"]
		out := x.run(ctx, "slow", job{ID: "t", Loops: 1, SleepMillis: 5000})
		if out.Status != types.ExecutionStatusFailed || aws.ToString(out.Error) != "Sandbox.Timedout" {
			x.fatalf("status %s error %q, want FAILED Sandbox.Timedout", out.Status, aws.ToString(out.Error))
		}
		events := x.history(ctx, aws.ToString(out.ExecutionArn))
		for _, e := range events {
			if d := e.LambdaFunctionScheduledEventDetails; d != nil && aws.ToString(d.Resource) != svc.FunctionArn["slow"] {
				t.Errorf("scheduled on %s, want the slow function", aws.ToString(d.Resource))
			}
		}
	})

	t.Run("ConcurrentExecutionsUseBothInstances", func(t *testing.T) {
		x := *x
		x.t = t
		j := job{ID: "p1", Loops: 1, SleepMillis: 1000}
		a := x.start(ctx, "parallel-1", input(t, j))
		j.ID = "p2"
		b := x.start(ctx, "parallel-2", input(t, j))
		type work struct {
			Progress struct {
				PID       int   `json:"pid"`
				StartedMs int64 `json:"startedMs"`
				EndedMs   int64 `json:"endedMs"`
			} `json:"progress"`
		}
		var w [2]work
		for i, arn := range []string{a, b} {
			out := x.wait(ctx, arn)
			if out.Status != types.ExecutionStatusSucceeded {
				x.fatalf("%s: status %s (%s: %s)", arn, out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
			}
			if err := json.Unmarshal([]byte(aws.ToString(out.Output)), &w[i]); err != nil {
				t.Fatal(err)
			}
		}
		p, q := w[0].Progress, w[1].Progress
		if p.PID == q.PID {
			t.Errorf("both work steps ran in pid %d", p.PID)
		}
		if p.StartedMs >= q.EndedMs || q.StartedMs >= p.EndedMs {
			t.Errorf("work steps did not overlap: %+v and %+v", p, q)
		}
	})

	t.Run("StartExecutionIsIdempotentWhileRunning", func(t *testing.T) {
		x := *x
		x.t = t
		in := input(t, job{ID: "i", Loops: 1, SleepMillis: 700})
		first := x.start(ctx, "idempotent", in)
		if again := x.start(ctx, "idempotent", in); again != first {
			t.Errorf("same name and input: %s, then %s", first, again)
		}
		_, err := x.client.StartExecution(ctx, &sfn.StartExecutionInput{
			StateMachineArn: aws.String(x.smArn),
			Name:            aws.String("idempotent"),
			Input:           aws.String(input(t, job{ID: "other", Loops: 1})),
		})
		var exists *types.ExecutionAlreadyExists
		if !errors.As(err, &exists) {
			t.Errorf("same name, other input: %v, want ExecutionAlreadyExists", err)
		}
		if out := x.wait(ctx, first); out.Status != types.ExecutionStatusSucceeded {
			x.fatalf("status %s", out.Status)
		}
		// As on AWS, a closed execution's name can't be reused.
		_, err = x.client.StartExecution(ctx, &sfn.StartExecutionInput{
			StateMachineArn: aws.String(x.smArn), Name: aws.String("idempotent"), Input: aws.String(in),
		})
		if !errors.As(err, &exists) {
			t.Errorf("same name and input after it ended: %v, want ExecutionAlreadyExists", err)
		}
	})

	t.Run("StopExecution", func(t *testing.T) {
		x := *x
		x.t = t
		arn := x.start(ctx, "stopped", input(t, job{ID: "s", Loops: 1, SleepMillis: 500}))
		if _, err := x.client.StopExecution(ctx, &sfn.StopExecutionInput{
			ExecutionArn: aws.String(arn), Error: aws.String("Cancelled"), Cause: aws.String("by the test"),
		}); err != nil {
			t.Fatal(err)
		}
		out := x.wait(ctx, arn)
		if out.Status != types.ExecutionStatusAborted || aws.ToString(out.Error) != "Cancelled" || aws.ToString(out.Cause) != "by the test" {
			t.Errorf("status %s error %q cause %q", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause))
		}
		events := x.history(ctx, arn)
		if last := events[len(events)-1]; last.Type != types.HistoryEventTypeExecutionAborted {
			t.Errorf("last event %s", last.Type)
		}
		// Let the step still running end, so it can't delay other tests.
		x.waitIdle("s")
	})

	t.Run("ListExecutions", func(t *testing.T) {
		list := func(status types.ExecutionStatus) map[string]types.ExecutionListItem {
			t.Helper()
			items := make(map[string]types.ExecutionListItem)
			p := sfn.NewListExecutionsPaginator(x.client, &sfn.ListExecutionsInput{
				StateMachineArn: aws.String(x.smArn), StatusFilter: status, MaxResults: 2,
			})
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					t.Fatalf("ListExecutions: %v", err)
				}
				for _, e := range page.Executions {
					items[aws.ToString(e.Name)] = e
				}
			}
			return items
		}
		all := list("")
		for _, name := range []string{"succeeds", "wait-loop", "retries", "exhausted", "rollback", "crash", "parallel-1", "parallel-2", "idempotent", "stopped"} {
			e, ok := all[name]
			if !ok {
				t.Errorf("execution %s not listed", name)
				continue
			}
			if e.StartDate == nil || e.StopDate == nil || aws.ToString(e.StateMachineArn) != x.smArn {
				t.Errorf("%s listed as %+v", name, e)
			}
		}
		if _, ok := all["lost"]; ok {
			t.Errorf("another state machine's execution is listed")
		}
		failed := list(types.ExecutionStatusFailed)
		if len(failed) != 3 {
			t.Errorf("FAILED executions: %d, want 3 (exhausted, rollback, crash)", len(failed))
		}
		for name, e := range failed {
			if e.Status != types.ExecutionStatusFailed {
				t.Errorf("%s is %s", name, e.Status)
			}
		}
	})

	t.Run("Errors", func(t *testing.T) {
		_, err := x.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{
			ExecutionArn: aws.String("arn:aws:states:us-east-1:123456789012:execution:toy:nope"),
		})
		var missing *types.ExecutionDoesNotExist
		if !errors.As(err, &missing) {
			t.Errorf("unknown execution: %v", err)
		}
		_, err = x.client.StartExecution(ctx, &sfn.StartExecutionInput{
			StateMachineArn: aws.String(sfnlocal.StateMachineARN("nope")),
		})
		var noSM *types.StateMachineDoesNotExist
		if !errors.As(err, &noSM) {
			t.Errorf("unknown state machine: %v", err)
		}
		_, err = x.client.StartExecution(ctx, &sfn.StartExecutionInput{
			StateMachineArn: aws.String(x.smArn), Name: aws.String("bad name"),
		})
		var badName *types.InvalidName
		if !errors.As(err, &badName) {
			t.Errorf("invalid name: %v", err)
		}
	})

	t.Run("CreateStateMachine", func(t *testing.T) {
		def := `{"StartAt":"Hello","States":{"Hello":{"Type":"Task","Resource":"` + svc.FunctionArn["toy"] + `",` +
			`"Parameters":{"step":"finish","job":{"id":"created"}},"End":true}}}`
		created, err := x.client.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{
			Name:       aws.String("created"),
			Definition: aws.String(def),
			RoleArn:    aws.String("arn:aws:iam::123456789012:role/test"),
		})
		if err != nil {
			t.Fatalf("CreateStateMachine: %v", err)
		}
		y := *x
		y.t = t
		y.smArn = aws.ToString(created.StateMachineArn)
		out := y.wait(ctx, y.start(ctx, "hello", "{}"))
		if out.Status != types.ExecutionStatusSucceeded || !strings.Contains(aws.ToString(out.Output), `"step":"finish"`) {
			y.fatalf("status %s output %s", out.Status, aws.ToString(out.Output))
		}
		_, err = x.client.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{
			Name: aws.String("broken"), Definition: aws.String(`{"StartAt":"Nowhere","States":{}}`),
			RoleArn: aws.String("arn:aws:iam::123456789012:role/test"),
		})
		var invalid *types.InvalidDefinition
		if !errors.As(err, &invalid) {
			t.Errorf("invalid definition: %v", err)
		}
	})

	t.Run("StopLeavesNoProcess", func(t *testing.T) {
		pids := svc.PIDs()
		if err := svc.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := svc.Stop(); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
		for _, pid := range pids {
			// Each pid leads a process group: the server, or an RIE and
			// its bootstrap.
			if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process group %d still exists after Stop (%v)", pid, err)
			}
		}
	})
}

func TestValidateASL(t *testing.T) {
	ctx := t.Context()
	if err := sfnlocal.ValidateASL(ctx, "testdata/toy.asl.json"); err != nil {
		t.Errorf("toy definition: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.asl.json")
	def := `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"${DrainFunctionArn}","Next":"Missing"}}}`
	if err := os.WriteFile(bad, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	err := sfnlocal.ValidateASL(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "MISSING_TRANSITION_TARGET") || !strings.Contains(err.Error(), bad) {
		t.Errorf("invalid definition: %v", err)
	}
}

func TestStartNamesWhatIsMissing(t *testing.T) {
	ctx := t.Context()
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(bootstrap, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}

	t.Run("RIE", func(t *testing.T) {
		t.Setenv("NODETIDE_RIE", filepath.Join(t.TempDir(), "aws-lambda-rie"))
		_, err := sfnlocal.Start(ctx, sfnlocal.Options{Functions: []sfnlocal.Function{{Name: "f", Bootstrap: bootstrap}}})
		if err == nil || !strings.Contains(err.Error(), "make testbed") {
			t.Errorf("Start without the RIE: %v", err)
		}
	})

	t.Run("NodeModules", func(t *testing.T) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "hack", "sfn-local"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "hack", "sfn-local", "server.mjs"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := sfnlocal.Start(ctx, sfnlocal.Options{Root: root})
		if err == nil || !strings.Contains(err.Error(), "npm ci") {
			t.Errorf("Start without node_modules: %v", err)
		}
	})

	t.Run("Substitution", func(t *testing.T) {
		_, err := sfnlocal.Start(ctx, sfnlocal.Options{
			StateMachines: []sfnlocal.StateMachine{{Name: "toy", DefinitionFile: "testdata/toy.asl.json"}},
		})
		if err == nil || !strings.Contains(err.Error(), "${ToyFunctionArn}") {
			t.Errorf("Start with a placeholder left: %v", err)
		}
	})
}

func TestFunctionArnKey(t *testing.T) {
	for name, want := range map[string]string{
		"drain":          "DrainFunctionArn",
		"nodetide-drain": "NodetideDrainFunctionArn",
		"my_fn2":         "MyFn2FunctionArn",
	} {
		if got := sfnlocal.FunctionArnKey(name); got != want {
			t.Errorf("FunctionArnKey(%q) = %q, want %q", name, got, want)
		}
	}
}
