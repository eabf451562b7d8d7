// Package lambdaevent holds what the three functions' event parsers share:
// the payload must be a JSON object, and EventBridge's scheduled event is
// told apart from a hand-made request before the request is read strictly
// (with pkg/strictjson, as every part of an event is).
package lambdaevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nodetide/nodetide/pkg/strictjson"
)

// Object returns the payload trimmed, or an error if it is not a JSON object.
func Object(payload []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("event must be a JSON object")
	}
	return trimmed, nil
}

// scheduledEvent is EventBridge's event envelope, as documented (replay-name
// is set on replayed events).
type scheduledEvent struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       time.Time       `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
	ReplayName string          `json:"replay-name,omitempty"`
}

// ScheduledTick reports whether an object is an EventBridge event (it has
// "detail-type"); one that is not EventBridge's scheduled event is an error.
// Either way the object is valid JSON with no field given twice, at any
// depth, when it returns without error.
func ScheduledTick(obj []byte) (bool, error) {
	var keys map[string]json.RawMessage
	if err := strictjson.Decode(obj, &keys); err != nil {
		if errors.Is(err, strictjson.ErrSyntax) {
			return false, fmt.Errorf("event is not valid JSON: %w", err)
		}
		return false, fmt.Errorf("event: %w", err)
	}
	if _, ok := keys["detail-type"]; !ok {
		return false, nil
	}
	var ev scheduledEvent
	if err := strictjson.Decode(obj, &ev); err != nil {
		return false, fmt.Errorf("EventBridge event: %w", err)
	}
	if ev.Source != "aws.events" || ev.DetailType != "Scheduled Event" {
		return false, fmt.Errorf("unsupported EventBridge event: source %q, detail-type %q (want aws.events, Scheduled Event)", ev.Source, ev.DetailType)
	}
	return true, nil
}
