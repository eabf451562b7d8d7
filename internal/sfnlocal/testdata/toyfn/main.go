// Command toyfn is a Lambda function for internal/sfnlocal's tests. Like the drain
// function it serves every Task state of its state machine, dispatched by a
// "step" field, and what each step does is driven by the job in its input:
// succeed, fail with a typed error, fail a number of times and then succeed
// (counted in a file, since retries may land on another instance), or sleep.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

// Transient is a failure worth retrying. aws-lambda-go reports an error's Go
// type name as errorType, so Step Functions sees the error name "Transient".
type Transient struct{ Step string }

func (e *Transient) Error() string { return "transient failure in step " + e.Step }

// Fatal is a failure the state machine catches and rolls back from.
type Fatal struct{ Step string }

func (e *Fatal) Error() string { return "fatal failure in step " + e.Step }

// Job drives the function's behaviour; the state machine passes it unchanged
// to every step.
type Job struct {
	ID string `json:"id"`
	// Loops is how many times the work step runs (with a Wait in between).
	Loops int `json:"loops"`
	// FailAt names the step that fails, with error type FailWith
	// ("Transient" or "Fatal"), FailTimes times (0: always).
	FailAt    string `json:"failAt,omitempty"`
	FailWith  string `json:"failWith,omitempty"`
	FailTimes int    `json:"failTimes,omitempty"`
	// CounterFile counts the failures so far; required with FailTimes.
	CounterFile string `json:"counterFile,omitempty"`
	// SleepMillis makes the work step take that long.
	SleepMillis int `json:"sleepMillis,omitempty"`
	// Exit makes the named step end the process instead of returning.
	Exit string `json:"exit,omitempty"`
}

// Event is a Task state's input.
type Event struct {
	Step      string `json:"step"`
	Job       Job    `json:"job"`
	Remaining int    `json:"remaining"`
}

// Result is what every step returns; the timestamps and process id let tests
// see which instance ran a step and whether two steps overlapped.
type Result struct {
	Step      string `json:"step"`
	Remaining int    `json:"remaining"`
	Function  string `json:"function"`
	PID       int    `json:"pid"`
	Started   int64  `json:"startedMs"`
	Ended     int64  `json:"endedMs"`
	Attempts  int    `json:"attempts,omitempty"`
}

func handle(ctx context.Context, ev Event) (Result, error) {
	res := Result{
		Step:     ev.Step,
		Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME"),
		PID:      os.Getpid(),
		Started:  time.Now().UnixMilli(),
	}
	fmt.Fprintf(os.Stderr, "toyfn: job %s step %s\n", ev.Job.ID, ev.Step)
	if ev.Job.Exit == ev.Step {
		os.Exit(3)
	}
	if ev.Job.FailAt == ev.Step {
		n, err := bump(ev.Job.CounterFile)
		if err != nil {
			return res, err
		}
		res.Attempts = n
		if ev.Job.FailTimes == 0 || n <= ev.Job.FailTimes {
			switch ev.Job.FailWith {
			case "Transient":
				return res, &Transient{Step: ev.Step}
			case "Fatal":
				return res, &Fatal{Step: ev.Step}
			default:
				return res, fmt.Errorf("unknown failWith %q", ev.Job.FailWith)
			}
		}
	}
	switch ev.Step {
	case "prepare":
		res.Remaining = ev.Job.Loops
	case "work":
		if ev.Job.SleepMillis > 0 {
			// It ignores ctx on purpose: a function that overruns its
			// timeout is what the timeout test needs, and returning at the
			// context's deadline races the emulator's own timeout.
			time.Sleep(time.Duration(ev.Job.SleepMillis) * time.Millisecond)
		}
		res.Remaining = max(ev.Remaining-1, 0)
	case "finish", "rollback":
	default:
		return res, fmt.Errorf("unknown step %q", ev.Step)
	}
	res.Ended = time.Now().UnixMilli()
	return res, nil
}

// bump increments the number in path and returns it. Steps of one execution
// never run at the same time, so no locking is needed.
func bump(path string) (int, error) {
	if path == "" {
		return 1, nil
	}
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return 0, fmt.Errorf("read counter: %w", err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	n++
	if err := os.WriteFile(path, []byte(strconv.Itoa(n)), 0o600); err != nil {
		return 0, fmt.Errorf("write counter: %w", err)
	}
	return n, nil
}

func main() { lambda.Start(handle) }
