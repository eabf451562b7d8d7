// Package lambdaevent holds what the three functions' event parsers share:
// the payload must be a JSON object, and EventBridge's scheduled event is
// told apart from a hand-made request before the request is read strictly.
package lambdaevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// Object returns the payload trimmed, or an error if it is not a JSON object.
func Object(payload []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("event must be a JSON object")
	}
	return trimmed, nil
}

// ScheduledTick reports whether an object is an EventBridge event (it has
// "detail-type"); one that is not EventBridge's scheduled event is an error.
func ScheduledTick(obj []byte) (bool, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(obj, &keys); err != nil {
		return false, fmt.Errorf("event is not valid JSON: %w", err)
	}
	if _, ok := keys["detail-type"]; !ok {
		return false, nil
	}
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(obj, &ev); err != nil {
		return false, fmt.Errorf("EventBridge event: %w", err)
	}
	if ev.Source != "aws.events" || ev.DetailType != "Scheduled Event" {
		return false, fmt.Errorf("unsupported EventBridge event: source %q, detail-type %q (want aws.events, Scheduled Event)", ev.Source, ev.DetailType)
	}
	return true, nil
}
