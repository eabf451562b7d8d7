package trigger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// maxDepth bounds the nesting checkNoDuplicates walks (an Event is a few
// levels deep); deeper is refused rather than walked.
const maxDepth = 64

// checkNoDuplicates walks one JSON value and fails on an object that names
// a field twice, at any depth, or on anything after the value.
func checkNoDuplicates(dec *json.Decoder) error {
	if err := walk(dec, 0, "$"); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

func walk(dec *json.Decoder, depth int, path string) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: nested more than %d levels", path, maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%s: not valid JSON: %w", path, err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch delim {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%s: not valid JSON: %w", path, err)
			}
			key, _ := k.(string)
			if seen[key] {
				return fmt.Errorf("%s.%s: field given twice", path, key)
			}
			seen[key] = true
			if err := walk(dec, depth+1, path+"."+key); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := walk(dec, depth+1, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return fmt.Errorf("%s: not valid JSON: %w", path, err)
	}
	return nil
}

// lambdaRequestID is the invocation's request ID, when running in Lambda.
func lambdaRequestID(ctx context.Context) (string, bool) {
	lc, ok := lambdacontext.FromContext(ctx)
	if !ok || lc.AwsRequestID == "" {
		return "", false
	}
	return lc.AwsRequestID, true
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
