package schedule

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Transitions in 2026 used below:
//   - Europe/Amsterdam springs forward on 29 March at 01:00Z (02:00 CET
//     becomes 03:00 CEST) and falls back on 25 October at 01:00Z (03:00 CEST
//     becomes 02:00 CET, so 02:00-02:59 comes twice).
//   - America/New_York springs forward on 8 March at 07:00Z (02:00 EST
//     becomes 03:00 EDT) and falls back on 1 November at 06:00Z (02:00 EDT
//     becomes 01:00 EST, so 01:00-01:59 comes twice).
//   - Australia/Lord_Howe moves by half an hour: 02:00 becomes 02:30 on 4
//     October, and 02:00 becomes 01:30 on 5 April.

func TestNextAcrossDST(t *testing.T) {
	tests := []struct {
		name, zone, expr, from string
		want                   []string
	}{
		// A wall-clock time inside the spring-forward gap fires once, at the
		// end of the gap; 5 and 6 fields alike.
		{"ams spring 02:30", "Europe/Amsterdam", "30 2 * * *", "2026-03-28T00:00:00+01:00",
			[]string{"2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"ams spring 02:30 with seconds", "Europe/Amsterdam", "0 30 2 * * *", "2026-03-28T00:00:00+01:00",
			[]string{"2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"ams spring 02:00", "Europe/Amsterdam", "0 0 2 * * *", "2026-03-29T00:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"}},
		{"ams spring 02:00 and 03:00 fire once at 03:00", "Europe/Amsterdam", "0 2,3 * * *", "2026-03-29T00:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00", "2026-03-30T03:00:00+02:00"}},
		{"ams spring two times in the gap fire once", "Europe/Amsterdam", "0,30 2 * * *", "2026-03-29T00:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"}},
		{"ams spring daytime unaffected", "Europe/Amsterdam", "0 0 8 * * *", "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T08:00:00+02:00", "2026-03-30T08:00:00+02:00"}},
		// A wall-clock time shown twice fires once, at the first.
		{"ams fall 02:30", "Europe/Amsterdam", "30 2 * * *", "2026-10-24T00:00:00+02:00",
			[]string{"2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"ams fall 02:30 with seconds", "Europe/Amsterdam", "0 30 2 * * *", "2026-10-24T00:00:00+02:00",
			[]string{"2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"ams fall two fixed times", "Europe/Amsterdam", "0,30 2 * * *", "2026-10-25T00:00:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:00:00+01:00"}},
		{"ams fall from within the repeat", "Europe/Amsterdam", "30 2 * * *", "2026-10-25T02:15:00+01:00",
			[]string{"2026-10-26T02:30:00+01:00"}},
		// Rhythms: every instant the clock matches.
		{"ams spring hourly", "Europe/Amsterdam", "0 * * * *", "2026-03-29T00:30:00+01:00",
			[]string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"}},
		{"ams fall hourly", "Europe/Amsterdam", "0 * * * *", "2026-10-25T01:30:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"}},
		{"ams spring half past hourly", "Europe/Amsterdam", "30 * * * *", "2026-03-29T01:00:00+01:00",
			[]string{"2026-03-29T01:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00"}},
		{"ams spring every minute", "Europe/Amsterdam", "* * * * *", "2026-03-29T01:58:00+01:00",
			[]string{"2026-03-29T01:59:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:01:00+02:00"}},
		{"ams fall every minute", "Europe/Amsterdam", "* * * * *", "2026-10-25T02:58:00+02:00",
			[]string{"2026-10-25T02:59:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:01:00+01:00"}},
		{"ams fall every minute with seconds", "Europe/Amsterdam", "0 * * * * *", "2026-10-25T02:58:00+02:00",
			[]string{"2026-10-25T02:59:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:01:00+01:00"}},
		{"ams spring every second", "Europe/Amsterdam", "* * * * * *", "2026-03-29T01:59:58+01:00",
			[]string{"2026-03-29T01:59:59+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:00:01+02:00"}},
		{"ams spring quarter hours in the gap", "Europe/Amsterdam", "*/15 2 * * *", "2026-03-29T00:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"}},
		{"ams fall quarter hours in the repeat", "Europe/Amsterdam", "*/15 2 * * *", "2026-10-25T00:00:00+02:00",
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:15:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:45:00+02:00",
				"2026-10-25T02:00:00+01:00", "2026-10-25T02:15:00+01:00", "2026-10-25T02:30:00+01:00", "2026-10-25T02:45:00+01:00",
				"2026-10-26T02:00:00+01:00"}},
		// New York: the gap is 02:00-02:59, the repeat 01:00-01:59.
		{"nyc spring 02:30", "America/New_York", "30 2 * * *", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"nyc spring 02:30 with seconds", "America/New_York", "0 30 2 * * *", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"nyc spring Sundays at 02:00", "America/New_York", "0 2 * * 0", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-15T02:00:00-04:00"}},
		{"nyc fall 01:30", "America/New_York", "30 1 * * *", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"nyc fall 01:30 with seconds", "America/New_York", "0 30 1 * * *", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"nyc spring every minute", "America/New_York", "* * * * *", "2026-03-08T01:58:00-05:00",
			[]string{"2026-03-08T01:59:00-05:00", "2026-03-08T03:00:00-04:00"}},
		{"nyc fall hourly", "America/New_York", "0 * * * *", "2026-11-01T00:30:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}},
		{"nyc fall half hours", "America/New_York", "*/30 * * * *", "2026-11-01T00:45:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00", "2026-11-01T02:00:00-05:00"}},
		// Half-hour shifts.
		{"lord howe spring", "Australia/Lord_Howe", "15 2 * * *", "2026-10-03T12:00:00+10:30",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
		{"lord howe fall", "Australia/Lord_Howe", "45 1 * * *", "2026-04-04T12:00:00+11:00",
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseCron(tt.expr, mustZone(t, tt.zone))
			if err != nil {
				t.Fatal(err)
			}
			from := mustTime(t, tt.from)
			got := formatAll(sequence(c, from, len(tt.want)))
			if want := strings.Join(tt.want, " "); got != want {
				t.Errorf("%q in %s from %s:\n got %s\nwant %s", tt.expr, tt.zone, tt.from, got, want)
			}
			// Backwards from just after the last, Prev retraces the same times.
			var back []time.Time
			for at := c.Next(mustTime(t, tt.want[len(tt.want)-1])); len(back) < len(tt.want); {
				at = c.Prev(at)
				back = append([]time.Time{at}, back...)
			}
			if got := formatAll(back); got != strings.Join(tt.want, " ") {
				t.Errorf("Prev backwards:\n got %s\nwant %s", got, strings.Join(tt.want, " "))
			}
		})
	}
}

func TestFireCountsOnTransitionDays(t *testing.T) {
	tests := []struct {
		zone, expr, from, to string
		want                 int
	}{
		// Whole local days, midnight to midnight.
		{"Europe/Amsterdam", "* * * * *", "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 23 * 60},
		{"Europe/Amsterdam", "* * * * *", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25 * 60},
		{"Europe/Amsterdam", "0 * * * *", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25},
		{"Europe/Amsterdam", "0 * * * *", "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 23},
		{"America/New_York", "* * * * *", "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00", 25 * 60},
		{"America/New_York", "* * * * *", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00", 23 * 60},
		// A daily time fires every day of the year, transition days once.
		{"Europe/Amsterdam", "30 2 * * *", "2026-01-01T00:00:00+01:00", "2027-01-01T00:00:00+01:00", 365},
		{"Europe/Amsterdam", "0 30 2 * * *", "2026-01-01T00:00:00+01:00", "2027-01-01T00:00:00+01:00", 365},
		{"America/New_York", "30 1 * * *", "2026-01-01T00:00:00-05:00", "2027-01-01T00:00:00-05:00", 365},
		{"America/New_York", "30 2 * * *", "2026-01-01T00:00:00-05:00", "2027-01-01T00:00:00-05:00", 365},
		{"Australia/Lord_Howe", "45 1 * * *", "2026-01-01T00:00:00+11:00", "2027-01-01T00:00:00+11:00", 365},
	}
	for _, tt := range tests {
		t.Run(tt.zone+" "+tt.expr+" "+tt.from, func(t *testing.T) {
			c, err := ParseCron(tt.expr, mustZone(t, tt.zone))
			if err != nil {
				t.Fatal(err)
			}
			got := c.Between(mustTime(t, tt.from), mustTime(t, tt.to), 1<<20)
			if len(got) != tt.want {
				t.Errorf("%d fire times, want %d", len(got), tt.want)
			}
			for i := 1; i < len(got); i++ {
				if !got[i].After(got[i-1]) {
					t.Fatalf("fire times not increasing: %s then %s", got[i-1], got[i])
				}
			}
		})
	}
}

func TestDue(t *testing.T) {
	tests := []struct {
		name, zone, expr, from, to string
		want                       string // "" when nothing is due
	}{
		{"several in the window: the latest", "UTC", "*/5 * * * *", "2026-06-01T08:00:00Z", "2026-06-01T08:17:30Z", "2026-06-01T08:15:00Z"},
		{"end is inclusive", "UTC", "*/5 * * * *", "2026-06-01T08:14:59Z", "2026-06-01T08:15:00Z", "2026-06-01T08:15:00Z"},
		{"start is exclusive", "UTC", "*/5 * * * *", "2026-06-01T08:15:00Z", "2026-06-01T08:19:59Z", ""},
		{"empty window", "UTC", "*/5 * * * *", "2026-06-01T08:15:00Z", "2026-06-01T08:15:00Z", ""},
		{"backwards window", "UTC", "*/5 * * * *", "2026-06-01T09:00:00Z", "2026-06-01T08:00:00Z", ""},
		{"sub-second end", "UTC", "* * * * * *", "2026-06-01T08:00:00Z", "2026-06-01T08:00:01.5Z", "2026-06-01T08:00:01Z"},
		{"days of missed ticks: once", "UTC", "0 8 * * *", "2026-06-01T08:00:00Z", "2026-06-04T09:00:00Z", "2026-06-04T08:00:00Z"},
		{"daytime in Amsterdam", "Europe/Amsterdam", "0 0 8 * * *", "2026-06-01T07:00:00+02:00", "2026-06-01T08:00:30+02:00", "2026-06-01T08:00:00+02:00"},
		{"gap time due at the gap's end", "Europe/Amsterdam", "30 2 * * *", "2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T03:00:00+02:00"},
		{"gap time not due before it", "Europe/Amsterdam", "30 2 * * *", "2026-03-29T00:00:00Z", "2026-03-29T00:59:59Z", ""},
		{"repeated time not due again", "Europe/Amsterdam", "30 2 * * *", "2026-10-25T02:45:00+02:00", "2026-10-25T02:45:00+01:00", ""},
		{"repeated time due at the first", "Europe/Amsterdam", "30 2 * * *", "2026-10-25T02:00:00+02:00", "2026-10-25T02:45:00+01:00", "2026-10-25T02:30:00+02:00"},
		{"rhythm due again in the repeat", "Europe/Amsterdam", "30 * * * *", "2026-10-25T02:45:00+02:00", "2026-10-25T02:45:00+01:00", "2026-10-25T02:30:00+01:00"},
		{"rare: leap day", "UTC", "0 0 29 2 *", "2026-01-01T00:00:00Z", "2030-01-01T00:00:00Z", "2028-02-29T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseCron(tt.expr, mustZone(t, tt.zone))
			if err != nil {
				t.Fatal(err)
			}
			from, to := mustTimeNano(t, tt.from), mustTimeNano(t, tt.to)
			got, ok := c.Due(from, to)
			switch {
			case tt.want == "" && ok:
				t.Errorf("Due = %s, want nothing due", got.Format(time.RFC3339))
			case tt.want != "" && !ok:
				t.Errorf("nothing due, want %s", tt.want)
			case tt.want != "" && got.Format(time.RFC3339) != tt.want:
				t.Errorf("Due = %s, want %s", got.Format(time.RFC3339), tt.want)
			}
		})
	}
}

func mustTimeNano(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestBetweenLimit(t *testing.T) {
	c, err := ParseCron("* * * * *", nil)
	if err != nil {
		t.Fatal(err)
	}
	from := mustTime(t, "2026-06-01T00:00:00Z")
	if got := c.Between(from, from.Add(time.Hour), 3); formatAll(got) != "2026-06-01T00:01:00Z 2026-06-01T00:02:00Z 2026-06-01T00:03:00Z" {
		t.Errorf("Between with limit 3 = %s", formatAll(got))
	}
	if got := c.Between(from, from.Add(time.Hour), 0); len(got) != 0 {
		t.Errorf("Between with limit 0 = %s, want none", formatAll(got))
	}
	if got := c.Between(from, from.Add(time.Hour), 1000); len(got) != 60 {
		t.Errorf("Between over an hour gave %d times, want 60", len(got))
	}
}

func TestPrevAndNextAtTheEdges(t *testing.T) {
	c, err := ParseCron("0 0 1 1 *", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Next(time.Date(9999, 6, 1, 0, 0, 0, 0, time.UTC)); !got.IsZero() {
		t.Errorf("Next past year 9999 = %s, want none", got)
	}
	if got := c.Prev(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)); !got.IsZero() {
		t.Errorf("Prev before year 1 = %s, want none", got)
	}
	if got := c.Next(time.Time{}); !got.Equal(time.Date(2, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Next from the zero Time = %s", got)
	}
	if got := c.Prev(mustTimeNano(t, "2026-01-01T00:00:00.000000001Z")); !got.Equal(mustTime(t, "2026-01-01T00:00:00Z")) {
		t.Errorf("Prev just after a fire time = %s, want it", got)
	}
	if got := c.Prev(mustTime(t, "2026-01-01T00:00:00Z")); !got.Equal(mustTime(t, "2025-01-01T00:00:00Z")) {
		t.Errorf("Prev at a fire time = %s, want the one before", got)
	}
	if got := c.Next(mustTimeNano(t, "2025-12-31T23:59:59.5Z")); !got.Equal(mustTime(t, "2026-01-01T00:00:00Z")) {
		t.Errorf("Next half a second before a fire time = %s, want it", got)
	}
}

// TestAgainstReference compares Between, Prev and Due with a slow reference
// that applies the documented rules one second at a time, around every
// transition of several zones.
func TestAgainstReference(t *testing.T) {
	exprs := []string{
		"* * * * *", "*/7 * * * *", "0 * * * *", "30 * * * *", "*/15 2 * * *",
		"30 2 * * *", "0 30 2 * * *", "15,45 1-3 * * *", "0 0,30 1,2 * * *",
		"*/20 * 2 * * *", "59 59 1 * * *", "0 0 3 * * *", "0 0 2 * * *", "0 30 1 * * 0",
		"10 2 * * *", "50 1 * * *",
	}
	windows := []struct{ zone, around string }{
		{"Europe/Amsterdam", "2026-03-29T01:00:00Z"},
		{"Europe/Amsterdam", "2026-10-25T01:00:00Z"},
		{"America/New_York", "2026-03-08T07:00:00Z"},
		{"America/New_York", "2026-11-01T06:00:00Z"},
		{"Australia/Lord_Howe", "2026-10-03T15:30:00Z"},
		{"Australia/Lord_Howe", "2026-04-04T15:00:00Z"},
		{"Australia/Sydney", "2026-04-04T16:00:00Z"},
		{"Europe/Amsterdam", "2040-12-31T23:00:00Z"}, // a leap year's end, past the zone table
		{"Australia/Sydney", "2040-12-31T13:00:00Z"},
		{"UTC", "2026-06-01T00:00:00Z"},
	}
	for _, w := range windows {
		loc := mustZone(t, w.zone)
		around := mustTime(t, w.around)
		from, to := around.Add(-4*time.Hour), around.Add(4*time.Hour)
		for _, expr := range exprs {
			t.Run(fmt.Sprintf("%s %s %s", w.zone, w.around, expr), func(t *testing.T) {
				c, err := ParseCron(expr, loc)
				if err != nil {
					t.Fatal(err)
				}
				want := formatAll(referenceFires(c, from, to))
				if got := formatAll(c.Between(from, to, 1<<20)); got != want {
					t.Errorf("Between:\n got %s\nwant %s", got, want)
				}
				var back []time.Time
				for at := to.Add(time.Nanosecond); ; {
					at = c.Prev(at)
					if !at.After(from) {
						break
					}
					back = append([]time.Time{at}, back...)
				}
				if got := formatAll(back); got != want {
					t.Errorf("Prev backwards:\n got %s\nwant %s", got, want)
				}
				ref := referenceFires(c, from, to)
				due, ok := c.Due(from, to)
				if len(ref) == 0 && ok || len(ref) > 0 && (!ok || !due.Equal(ref[len(ref)-1])) {
					t.Errorf("Due = %s, %v; want the last of %s", due, ok, want)
				}
			})
		}
	}
}

// referenceFires lists the fire times in (from, to] by testing every second
// against the rules as documented on Next.
func referenceFires(c Cron, from, to time.Time) []time.Time {
	loc := c.Location()
	var out []time.Time
	for u := from.Unix() + 1; u <= to.Unix(); u++ {
		at := time.Unix(u, 0).In(loc)
		fires := c.matchesWall(at) && (!c.fixed || !shownBefore(at))
		if !fires {
			// The first instant after a gap fires for the gap's matches.
			_, o := at.Zone()
			_, p := at.Add(-time.Second).Zone()
			for w := u + int64(p); w < u+int64(o) && !fires; w++ {
				fires = c.matchesWall(time.Unix(w, 0).UTC())
			}
		}
		if fires {
			out = append(out, at)
		}
	}
	return out
}

// shownBefore reports whether the clock showed at's wall time earlier, as
// it does in the hour after a fall-back (half an hour at Lord Howe).
func shownBefore(at time.Time) bool {
	wall := func(t time.Time) string { return t.Format("2006-01-02 15:04:05") }
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if wall(at.Add(-d)) == wall(at) {
			return true
		}
	}
	return false
}

func BenchmarkNext(b *testing.B) {
	ams := mustZone(b, "Europe/Amsterdam")
	for _, expr := range []string{"* * * * *", "0 0 8 * * 1-5", "30 2 * * *", "0 0 29 2 *", "0 0 1 2 1"} {
		c, err := ParseCron(expr, ams)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(expr, func(b *testing.B) {
			from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for b.Loop() {
				from = c.Next(from)
				if from.Year() > 2200 {
					from = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				}
			}
		})
	}
}

// TestLeapYearsAfterTheZoneTable covers the years whose transitions Go
// derives from a zone's TZ rule, where its zone periods are computed per
// year (see zoneBounds).
func TestLeapYearsAfterTheZoneTable(t *testing.T) {
	tests := []struct {
		zone, expr, from, to string
		want                 int
	}{
		{"Europe/Amsterdam", "0 0 12 * * *", "2040-01-01T00:00:00Z", "2041-01-01T00:00:00Z", 366},
		{"Europe/Amsterdam", "0 * * * *", "2040-12-30T00:00:00Z", "2041-01-02T00:00:00Z", 72},
		{"Australia/Sydney", "30 2 * * *", "2048-01-01T00:00:00Z", "2049-01-01T00:00:00Z", 366},
		{"America/New_York", "0 0 29 2 *", "2030-01-01T00:00:00Z", "2101-01-01T00:00:00Z", 17},
		{"Europe/Amsterdam", "* * * * *", "2044-12-31T10:00:00Z", "2045-01-01T10:00:00Z", 24 * 60},
	}
	for _, tt := range tests {
		t.Run(tt.zone+" "+tt.expr+" "+tt.from, func(t *testing.T) {
			c, err := ParseCron(tt.expr, mustZone(t, tt.zone))
			if err != nil {
				t.Fatal(err)
			}
			from, to := mustTime(t, tt.from), mustTime(t, tt.to)
			got := c.Between(from, to, 1<<20)
			if len(got) != tt.want {
				t.Errorf("%d fire times, want %d", len(got), tt.want)
			}
			var back int
			for at := to.Add(time.Nanosecond); ; back++ {
				if at = c.Prev(at); !at.After(from) {
					break
				}
			}
			if back != tt.want {
				t.Errorf("Prev found %d fire times, want %d", back, tt.want)
			}
		})
	}
}
