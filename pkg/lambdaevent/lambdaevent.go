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
	if len(trimmed) == 0 {
		return nil, errors.New("event is empty: it must be a JSON object")
	}
	if trimmed[0] != '{' {
		return nil, errors.New("event must be a JSON object")
	}
	return trimmed, nil
}

// Envelope is EventBridge's event envelope, as documented (replay-name is
// set on replayed events). Detail is left as it came: each caller reads
// what it needs of it.
type Envelope struct {
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

// EventBridge returns the envelope of an object that is an EventBridge
// event (it has "detail-type"), nil for any other object. Either way the
// object is valid JSON with no field given twice, at any depth, when it
// returns without error.
func EventBridge(obj []byte) (*Envelope, error) {
	var keys map[string]json.RawMessage
	if err := strictjson.Decode(obj, &keys); err != nil {
		if errors.Is(err, strictjson.ErrSyntax) {
			return nil, fmt.Errorf("event is not valid JSON: %w", err)
		}
		return nil, fmt.Errorf("event: %w", err)
	}
	if _, ok := keys["detail-type"]; !ok {
		return nil, nil
	}
	var ev Envelope
	if err := strictjson.Decode(obj, &ev); err != nil {
		return nil, fmt.Errorf("EventBridge event: %w", err)
	}
	return &ev, nil
}

// ScheduledTick reports whether an object is EventBridge's scheduled event;
// another EventBridge event is an error.
func ScheduledTick(obj []byte) (bool, error) {
	ev, err := EventBridge(obj)
	if err != nil || ev == nil {
		return false, err
	}
	if ev.Source != "aws.events" || ev.DetailType != "Scheduled Event" {
		return false, fmt.Errorf("unsupported EventBridge event: source %q, detail-type %q (want aws.events, Scheduled Event)", ev.Source, ev.DetailType)
	}
	return true, nil
}
