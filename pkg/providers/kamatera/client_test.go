package kamatera

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCommandIDs(t *testing.T) {
	tests := []struct {
		raw  string
		want []string
		err  bool
	}{
		{`["1234"]`, []string{"1234"}, false},
		{`[1234, 1235]`, []string{"1234", "1235"}, false},
		{`{"password": "Gen-pw-1", "commandIds": ["77"]}`, []string{"77"}, false},
		{`{"password": "Gen-pw-1", "commandIds": [78]}`, []string{"78"}, false},
		{`"99"`, []string{"99"}, false},
		{`100`, []string{"100"}, false},
		{`[{"id": 1}]`, nil, true},
		{`not json`, nil, true},
	}
	for _, tt := range tests {
		got, err := commandIDs(json.RawMessage(tt.raw))
		if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("commandIDs(%s) = %v, %v; want %v (error %v)", tt.raw, got, err, tt.want, tt.err)
		}
	}
}

func TestRetryStatus(t *testing.T) {
	tests := []struct {
		code   int
		policy retryPolicy
		want   bool
	}{
		{500, retryIdempotent, true},
		{502, retryIdempotent, true},
		{504, retryIdempotent, true},
		{429, retryIdempotent, true},
		{400, retryIdempotent, false},
		{401, retryIdempotent, false},
		{404, retryIdempotent, false},
		{500, retryCreate, false},
		{502, retryCreate, false},
		{504, retryCreate, false},
		{503, retryCreate, true},
		{429, retryCreate, true},
		{401, retryCreate, false},
	}
	for _, tt := range tests {
		if got := retryStatus(tt.code, tt.policy); got != tt.want {
			t.Errorf("retryStatus(%d, %d) = %v", tt.code, tt.policy, got)
		}
	}
}

// The API's own messages are passed on, but never a secret they might echo.
func TestAPIErrorsAreRedacted(t *testing.T) {
	const secret = "TopSecretKey123"
	var gotHeaders http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeaders = r.Header.Clone()
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"message":"key `+secret+` lacks permission"}`)
	}))
	defer srv.Close()
	var logs strings.Builder
	c := &apiClient{
		baseURL:  srv.URL,
		http:     srv.Client(),
		auth:     func(h http.Header) { h.Set("AuthClientId", "id"); h.Set("AuthSecret", secret) },
		redact:   redactor(secret),
		attempts: 2,
		backoff:  time.Millisecond,
		timeout:  time.Second,
		log:      slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	_, err := c.listServers(context.Background())
	var apiErr *APIError
	if !errors.As(err, &apiErr) || !errors.Is(err, ErrUnauthorized) || apiErr.StatusCode != 403 {
		t.Fatalf("error %v", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
		t.Errorf("secret shown: %v / %s", err, logs.String())
	}
	if !strings.Contains(err.Error(), "key [redacted] lacks permission") {
		t.Errorf("message lost: %v", err)
	}
	if gotHeaders.Get("AuthClientId") != "id" || gotHeaders.Get("AuthSecret") != secret || gotHeaders.Get("Accept") != "application/json" {
		t.Errorf("headers %v", gotHeaders)
	}
}

func TestErrorMessage(t *testing.T) {
	tests := map[string]string{
		`{"message":"No servers found"}`: "No servers found",
		`{"error":"bad"}`:                "bad",
		"Gateway Timeout\n":              "Gateway Timeout",
		strings.Repeat("x", 300):         strings.Repeat("x", 200) + "…",
	}
	for in, want := range tests {
		if got := errorMessage([]byte(in)); got != want {
			t.Errorf("errorMessage(%.20q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorIn2xx(t *testing.T) {
	tests := []struct {
		body   string
		msg    string
		failed bool
		auth   bool
	}{
		{`[{"id":"1","name":"a","power":"on"}]`, "", false, false},
		{`["1001"]`, "", false, false},
		{`{"password":"x","commandIds":["1001"]}`, "", false, false},
		{`{"message":"Authentication failed"}`, "Authentication failed", true, true},
		{`{"errors":[{"info":"Invalid AuthSecret"}]}`, "[map[info:Invalid AuthSecret]]", true, true},
		{`{"message":"No servers found"}`, "No servers found", true, false},
	}
	for _, tt := range tests {
		msg, failed := errorIn2xx([]byte(tt.body))
		if msg != tt.msg || failed != tt.failed {
			t.Errorf("%s: %q %v, want %q %v", tt.body, msg, failed, tt.msg, tt.failed)
		}
		if auth := errors.Is(&APIError{StatusCode: 200, Message: msg}, ErrUnauthorized); auth != tt.auth {
			t.Errorf("%s: unauthorized %v, want %v", tt.body, auth, tt.auth)
		}
	}
}
