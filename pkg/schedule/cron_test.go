package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// mustZone loads an IANA zone or fails the test.
func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// mustTime parses an RFC 3339 time or fails the test.
func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sequence calls Next n times from from.
func sequence(c Cron, from time.Time, n int) []time.Time {
	var out []time.Time
	for range n {
		from = c.Next(from)
		out = append(out, from)
	}
	return out
}

func formatAll(ts []time.Time) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		if t.IsZero() {
			parts[i] = "never"
			continue
		}
		parts[i] = t.Format(time.RFC3339)
	}
	return strings.Join(parts, " ")
}

func TestNextSequences(t *testing.T) {
	// 2026-01-01 is a Thursday.
	const from = "2026-01-01T00:00:00Z"
	tests := []struct {
		expr string
		want []string
	}{
		{"* * * * *", []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z", "2026-01-01T00:03:00Z"}},
		{"* * * * * *", []string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"}},
		{"0 0 8 * * *", []string{"2026-01-01T08:00:00Z", "2026-01-02T08:00:00Z", "2026-01-03T08:00:00Z"}},
		{"0 0 8 * * 1-5", []string{"2026-01-01T08:00:00Z", "2026-01-02T08:00:00Z", "2026-01-05T08:00:00Z"}},
		{"0 8 * * MON-FRI", []string{"2026-01-01T08:00:00Z", "2026-01-02T08:00:00Z", "2026-01-05T08:00:00Z"}},
		{"*/15 * * * *", []string{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z", "2026-01-01T01:00:00Z"}},
		{"5/20 * * * *", []string{"2026-01-01T00:05:00Z", "2026-01-01T00:25:00Z", "2026-01-01T00:45:00Z", "2026-01-01T01:05:00Z"}},
		{"0 0-6/3 * * *", []string{"2026-01-01T03:00:00Z", "2026-01-01T06:00:00Z", "2026-01-02T00:00:00Z"}},
		{"30 */2 * * * *", []string{"2026-01-01T00:00:30Z", "2026-01-01T00:02:30Z", "2026-01-01T00:04:30Z"}},
		{"0 9 * * sat,SUN", []string{"2026-01-03T09:00:00Z", "2026-01-04T09:00:00Z", "2026-01-10T09:00:00Z"}},
		{"0 0 * * 7", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"0 0 * * 0", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"0 12 * * 5-7", []string{"2026-01-02T12:00:00Z", "2026-01-03T12:00:00Z", "2026-01-04T12:00:00Z", "2026-01-09T12:00:00Z"}},
		{"0 0 * * */2", []string{"2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-06T00:00:00Z"}},
		{"0 0 1,15 * *", []string{"2026-01-15T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-15T00:00:00Z"}},
		// Both day fields restricted: the 13th or a Friday.
		{"0 0 13 * 5", []string{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z", "2026-01-16T00:00:00Z"}},
		{"0 0 0 13 * FRI", []string{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z"}},
		// Day-of-month starting with "*": both must match (Mondays on the 1st, 11th, 21st, 31st).
		{"0 0 */10 * 1", []string{"2026-05-11T00:00:00Z", "2026-06-01T00:00:00Z"}},
		{"0 0 ? * 1", []string{"2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"}},
		{"0 0 0 1 1 ?", []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"0 0 29 2 *", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"0 0 1 jun-AUG *", []string{"2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z", "2026-08-01T00:00:00Z", "2027-06-01T00:00:00Z"}},
		{"59 23 31 12 *", []string{"2026-12-31T23:59:00Z", "2027-12-31T23:59:00Z"}},
		{"0 0 31 * *", []string{"2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"}},
		{"  0   8  *  *  *  ", []string{"2026-01-01T08:00:00Z"}},
		{"@hourly", []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}},
		{"@daily", []string{"2026-01-02T00:00:00Z"}},
		{"@midnight", []string{"2026-01-02T00:00:00Z"}},
		{"@weekly", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"@monthly", []string{"2026-02-01T00:00:00Z"}},
		{"@YEARLY", []string{"2027-01-01T00:00:00Z"}},
		{"@annually", []string{"2027-01-01T00:00:00Z"}},
		{"0,30 8-9 * * *", []string{"2026-01-01T08:00:00Z", "2026-01-01T08:30:00Z", "2026-01-01T09:00:00Z", "2026-01-01T09:30:00Z", "2026-01-02T08:00:00Z"}},
		{"0 0 0 * * 1,3-4", []string{"2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z", "2026-01-08T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			c, err := ParseCron(tt.expr, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := formatAll(sequence(c, mustTime(t, from), len(tt.want)))
			if want := strings.Join(tt.want, " "); got != want {
				t.Errorf("Next from %s:\n got %s\nwant %s", from, got, want)
			}
		})
	}
}

func TestParseCronErrors(t *testing.T) {
	tests := []struct {
		expr  string
		field string // CronError.Field
		want  string // in the message
	}{
		{"", "", "empty expression"},
		{"* * * *", "", "4 fields, want 5"},
		{"* * * * * * *", "", "7 fields"},
		{"@every 5m", "", "2 fields"},
		{"@fortnightly", "", "unknown descriptor"},
		{"60 * * * *", "minute", "60 is out of range 0-59"},
		{"0 60 * * * *", "minute", "out of range 0-59"},
		{"60 0 * * * *", "second", "out of range 0-59"},
		{"0 24 * * *", "hour", "24 is out of range 0-23"},
		{"0 0 0 * *", "day-of-month", "0 is out of range 1-31"},
		{"0 0 32 * *", "day-of-month", "out of range 1-31"},
		{"0 0 * 13 *", "month", "13 is out of range 1-12"},
		{"0 0 * 0 *", "month", "out of range 1-12"},
		{"0 0 * * 8", "day-of-week", "8 is out of range 0-7"},
		{"0 0 * foo *", "month", `"foo" is neither a number nor a month name`},
		{"0 0 * * monday", "day-of-week", "neither a number nor a day-of-week name"},
		{"x * * * *", "minute", `"x" is not a number`},
		{"*/0 * * * *", "minute", `step "0" is not a positive whole number`},
		{"*/x * * * *", "minute", "step"},
		{"*/+5 * * * *", "minute", "step"},
		{"*/61 * * * *", "minute", "larger than the field's range"},
		{"+5 * * * *", "minute", "not a number"},
		{"5-1 * * * *", "minute", "runs backwards"},
		{"0 0 * * FRI-MON", "day-of-week", "runs backwards"},
		{"0 0 -1 * *", "day-of-month", "missing value"},
		{"0 0 1- * *", "day-of-month", "missing value"},
		{"1,,2 * * * *", "minute", "empty list item"},
		{"1, * * * *", "minute", "empty list item"},
		{"? * * * *", "minute", `"?" is only allowed`},
		{"0 0 ?/2 * *", "day-of-month", "not a number"},
		{"0 0 30 2 *", "day-of-month", "never occurs"},
		{"0 0 31 4,6,9,11 *", "day-of-month", "never occurs"},
		{"0 0 31 2 ?", "day-of-month", "never occurs"},
		{"99999999999999999999 * * * *", "minute", "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := ParseCron(tt.expr, nil)
			var ce *CronError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *CronError", err)
			}
			if ce.Field != tt.field {
				t.Errorf("field = %q, want %q (err %v)", ce.Field, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.expr) {
				t.Errorf("err = %q does not quote the expression", err)
			}
		})
	}
}

func TestParseCronAcceptsOnEitherDay(t *testing.T) {
	// February 31st never comes, but Mondays in February do.
	c, err := ParseCron("0 0 31 2 1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Next(mustTime(t, "2026-01-01T00:00:00Z")); !got.Equal(mustTime(t, "2026-02-02T00:00:00Z")) {
		t.Errorf("Next = %s, want the first Monday of February", got)
	}
}

func TestCronAccessors(t *testing.T) {
	ams := mustZone(t, "Europe/Amsterdam")
	c, err := ParseCron("0 0 8 * * *", ams)
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != "0 0 8 * * *" || c.Location() != ams {
		t.Errorf("String, Location = %q, %v", c.String(), c.Location())
	}
	if got := c.Next(mustTime(t, "2026-06-01T00:00:00Z")); got.Location() != ams || got.Format(time.RFC3339) != "2026-06-01T08:00:00+02:00" {
		t.Errorf("Next = %s in %v, want 08:00 in Amsterdam", got.Format(time.RFC3339), got.Location())
	}
	var zero Cron
	if zero.Location() != time.UTC || !zero.Next(time.Now()).IsZero() {
		t.Errorf("the zero Cron fires or has no location")
	}
}

func TestFixedClassification(t *testing.T) {
	tests := []struct {
		expr  string
		fixed bool
	}{
		{"30 2 * * *", true},
		{"0 0 8 * * *", true},
		{"0,30 1-3 * * *", true},
		{"@daily", true},
		{"* * * * *", false},
		{"0 * * * *", false},
		{"*/15 2 * * *", false},
		{"* 30 2 * * *", false},
		{"@hourly", false},
	}
	for _, tt := range tests {
		c, err := ParseCron(tt.expr, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.fixed != tt.fixed {
			t.Errorf("%q: fixed = %v, want %v", tt.expr, c.fixed, tt.fixed)
		}
	}
}

func TestLoadLocation(t *testing.T) {
	for _, name := range []string{"", "UTC"} {
		if loc, err := LoadLocation(name); err != nil || loc != time.UTC {
			t.Errorf("LoadLocation(%q) = %v, %v; want UTC", name, loc, err)
		}
	}
	if loc, err := LoadLocation("America/New_York"); err != nil || loc.String() != "America/New_York" {
		t.Errorf("LoadLocation(America/New_York) = %v, %v", loc, err)
	}
	for _, name := range []string{"Local", "Mars/Olympus_Mons", "../etc/passwd", "/etc/localtime", "europe/amsterdam "} {
		if _, err := LoadLocation(name); err == nil {
			t.Errorf("LoadLocation(%q) succeeded, want an error", name)
		}
	}
}
