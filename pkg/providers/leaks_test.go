package providers_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the handlers' goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// leakCheck gathers everything a test's code says — every log line (JSON,
// debug level and up, also what goes to slog's default logger) and every
// error string — and, when the test ends, fails it if any holds a secret.
type leakCheck struct {
	secrets []string
	logs    syncBuffer
	Log     *slog.Logger

	mu   sync.Mutex
	said []string
}

// newLeakCheck watches for secrets (empty ones are ignored). It replaces
// slog's default logger until the test ends, so tests using it must not run
// in parallel.
func newLeakCheck(t *testing.T, secrets ...string) *leakCheck {
	t.Helper()
	l := &leakCheck{}
	for _, s := range secrets {
		if s != "" {
			l.secrets = append(l.secrets, s)
		}
	}
	l.Log = slog.New(slog.NewJSONHandler(&l.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	prev := slog.Default()
	slog.SetDefault(l.Log)
	t.Cleanup(func() {
		slog.SetDefault(prev)
		l.verify(t)
	})
	return l
}

// err records an error's text (nil is ignored) and returns the error.
func (l *leakCheck) err(err error) error {
	if err != nil {
		l.say(err.Error())
	}
	return err
}

// say records text the code under test produced (an error, a result).
func (l *leakCheck) say(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.said = append(l.said, s)
}

func (l *leakCheck) verify(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	texts := append([]string{l.logs.String()}, l.said...)
	l.mu.Unlock()
	if strings.TrimSpace(texts[0]) == "" {
		t.Errorf("no log line was captured: the check would prove nothing")
	}
	for _, text := range texts {
		for _, s := range l.secrets {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("a secret appears in what the code logged or returned: …%s…", text[max(0, i-120):min(len(text), i+len(s)+40)])
			}
		}
	}
}

// lines are the captured log lines holding every one of parts.
func (l *leakCheck) lines(parts ...string) []string {
	var out []string
	for line := range strings.SplitSeq(l.logs.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}
