package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nodetide/nodetide/pkg/buildinfo"
)

// FunctionBuild is the build a function last started with and since when:
// the status document build-<function> (sk STATUS#build-drain,
// STATUS#build-schedule) for `nodetide status`. Evaluate's build is in its
// cycle status instead, written every cycle anyway.
type FunctionBuild struct {
	Build buildinfo.Info `json:"build"`
	// Since is the first start seen with this build.
	Since time.Time `json:"since"`
}

// BuildStatusName names function's build document.
func BuildStatusName(function string) string { return "build-" + function }

// RecordBuild stores b as the build function started with at now, unless
// the stored one is the same build: one read per start, and a write only
// when a new version is deployed. It says whether it wrote.
func RecordBuild(ctx context.Context, store StatusStore, function string, b buildinfo.Info, now time.Time) (bool, error) {
	prev, err := ReadBuild(ctx, store, function)
	switch {
	case err == nil && prev.Build == b:
		return false, nil
	case err != nil && !errors.Is(err, ErrNoStatus) && !isDecodeError(err):
		// (A document that does not decode is replaced, not kept forever.)
		return false, err
	}
	doc, err := json.Marshal(FunctionBuild{Build: b, Since: now.UTC()})
	if err != nil {
		return false, err
	}
	if err := store.PutStatus(ctx, BuildStatusName(function), doc); err != nil {
		return false, err
	}
	return true, nil
}

// ReadBuild returns the build function last started with; ErrNoStatus when
// none was recorded.
func ReadBuild(ctx context.Context, store StatusStore, function string) (FunctionBuild, error) {
	doc, err := store.GetStatus(ctx, BuildStatusName(function))
	if err != nil {
		return FunctionBuild{}, err
	}
	var fb FunctionBuild
	if err := json.Unmarshal(doc, &fb); err != nil {
		return FunctionBuild{}, decodeError{fmt.Errorf("status %s: %w", BuildStatusName(function), err)}
	}
	return fb, nil
}

// decodeError marks a stored build document that does not decode.
type decodeError struct{ error }

func (e decodeError) Unwrap() error { return e.error }

func isDecodeError(err error) bool {
	_, ok := errors.AsType[decodeError](err)
	return ok
}
