package schedule

import "time"

const (
	secondsPerDay = 24 * 60 * 60

	// searchSpan bounds every search. A valid expression fires at least
	// every few years: the rarest is a day-of-month such as the 1st that
	// must also fall on a given weekday in a given month, which recurs
	// within 12 years, or February 29 with any weekday, within 8.
	searchSpan = 30 * 366 * secondsPerDay

	// minUnix and maxUnix are 0001-01-01 and 9999-12-31T23:59:59 UTC: the
	// years a fire time can have, so that arithmetic on them can't overflow.
	minUnix = -62135596800
	maxUnix = 253402300799
)

// Next returns the first fire time strictly after after, in the cron's
// location, or the zero Time if there is none within 30 years or before
// year 10000.
//
// Fire times follow the wall clock of the location, with two rules for the
// days its clock jumps:
//
//   - A wall-clock time that doesn't exist, because the clock springs
//     forward over it, fires once, at the first instant after the gap: 02:30
//     in Europe/Amsterdam on the last Sunday of March fires at 03:00 CEST.
//     Every matching time inside one gap fires at that same instant, once.
//   - A wall-clock time the clock shows twice, because it falls back, fires
//     once, at its first occurrence, when the expression names particular
//     times: no "*" in its second, minute or hour field ("30 2 * * *",
//     "0 0 8 * * *", "0,30 1-3 * * *"). An expression with a "*" in one of
//     those fields ("* * * * *", "0 * * * *", "*/15 2 * * *") describes a
//     rhythm rather than a time of day, so it fires at every instant the
//     clock matches: an every-minute cron fires every minute through both
//     passes of a repeated hour (120 times), an hourly one at both 02:00
//     CEST and 02:00 CET.
//
// This is the rule Vixie cron and its descendants follow for changes of
// the clock, with the one difference that a skipped time of a rhythm
// fires at the end of the gap too rather than not at all: a schedule
// that scales up at 02:30 must not be lost once a year.
func (c Cron) Next(after time.Time) time.Time {
	start := after.Unix() + 1 // Unix rounds down, so this is the first whole second after
	if start > maxUnix {
		return time.Time{}
	}
	start = max(start, minUnix)
	u, ok := c.next(start, min(start+searchSpan, maxUnix+1))
	if !ok {
		return time.Time{}
	}
	return time.Unix(u, 0).In(c.Location())
}

// Prev returns the last fire time strictly before before, in the cron's
// location, or the zero Time if there is none within 30 years or after
// year 1. It follows Next's rules, so Prev(Next(t)) <= t.
func (c Cron) Prev(before time.Time) time.Time {
	end := before.Unix() // the last whole second before before…
	if before.Nanosecond() == 0 {
		end-- // …unless before is one itself
	}
	if end < minUnix {
		return time.Time{}
	}
	end = min(end, maxUnix)
	u, ok := c.prev(end, max(end-searchSpan, minUnix))
	if !ok {
		return time.Time{}
	}
	return time.Unix(u, 0).In(c.Location())
}

// Due returns the latest fire time in (from, to]. A window spanning
// several fire times yields only the latest: whoever acts on it acts once.
// The search goes back from to no further than from.
func (c Cron) Due(from, to time.Time) (fireAt time.Time, ok bool) {
	end := min(to.Unix(), maxUnix) // fire times are whole seconds, so <= to means <= to's second
	low := max(from.Unix()+1, minUnix)
	if end < low {
		return time.Time{}, false
	}
	u, ok := c.prev(end, low)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(u, 0).In(c.Location()), true
}

// Between returns the fire times in (from, to], earliest first, at most
// limit of them (none when limit is not positive).
func (c Cron) Between(from, to time.Time, limit int) []time.Time {
	var out []time.Time
	start := max(from.Unix()+1, minUnix)
	end := min(to.Unix(), maxUnix) + 1
	for len(out) < limit && start < end {
		u, ok := c.next(start, end)
		if !ok {
			break
		}
		out = append(out, time.Unix(u, 0).In(c.Location()))
		start = u + 1
	}
	return out
}

// next returns the first fire time (as Unix seconds) in [start, limit).
//
// It walks the location's zone periods (spans of constant UTC offset, as
// ZoneBounds gives them) and, within each, searches the wall calendar,
// which runs evenly there. The DST rules live at the periods' starts: a
// forward jump fires once at its instant if the skipped wall times hold a
// match; a backward jump makes fixed-time expressions skip the wall times
// they have already passed.
func (c Cron) next(start, limit int64) (int64, bool) {
	loc := c.Location()
	for u := start; u < limit; {
		t := time.Unix(u, 0).In(loc)
		_, offset := t.Zone()
		o := int64(offset)
		periodStart, periodEnd := zoneBounds(t)
		wallFrom := u + o
		if !periodStart.IsZero() {
			jump := periodStart.Unix()
			_, before := time.Unix(jump-1, 0).In(loc).Zone()
			p := int64(before)
			switch {
			case p < o && jump >= start:
				// Wall times [jump+p, jump+o) don't exist.
				if _, skipped := c.nextWall(jump+p, jump+o); skipped {
					return jump, true
				}
			case p > o && c.fixed:
				// Wall times [jump+o, jump+p) come round again.
				wallFrom = max(wallFrom, jump+p)
			}
		}
		end := limit
		if !periodEnd.IsZero() {
			end = min(end, max(periodEnd.Unix(), u+1)) // always onwards
		}
		if w, ok := c.nextWall(wallFrom, end+o); ok {
			return w - o, true
		}
		u = end
	}
	return 0, false
}

// prev returns the last fire time (as Unix seconds) in [low, end]; it is
// next run backwards.
func (c Cron) prev(end, low int64) (int64, bool) {
	loc := c.Location()
	for u := end; u >= low; {
		t := time.Unix(u, 0).In(loc)
		_, offset := t.Zone()
		o := int64(offset)
		periodStart, _ := zoneBounds(t)
		if periodStart.IsZero() || periodStart.Unix() < low {
			// The rest of the window lies within this period.
			wallLow := low + o
			if !periodStart.IsZero() && c.fixed {
				wallLow = max(wallLow, c.repeatedUntil(periodStart, o))
			}
			if w, ok := c.prevWall(u+o, wallLow); ok {
				return w - o, true
			}
			return 0, false
		}
		jump := periodStart.Unix()
		_, before := time.Unix(jump-1, 0).In(loc).Zone()
		p := int64(before)
		wallLow := jump + o
		if p > o && c.fixed {
			wallLow = jump + p
		}
		if w, ok := c.prevWall(u+o, wallLow); ok {
			return w - o, true
		}
		if p < o {
			if _, skipped := c.nextWall(jump+p, jump+o); skipped {
				return jump, true
			}
		}
		u = jump - 1
	}
	return 0, false
}

// zoneBounds is t.ZoneBounds with a repair. For the years a location's
// transitions come from its TZ rule (after its table, which usually ends in
// 2037), Go ends the period after a year's last transition 365 days after
// the year's start: on the last day of a leap year that end lies before t.
// The offset it reports is right, and no transition comes before the next
// year, which is where the period then ends. Otherwise the bounds are those
// of ZoneBounds, which may split a period in two at a year's start; an
// extra boundary with the same offset on both sides changes nothing here.
func zoneBounds(t time.Time) (start, end time.Time) {
	start, end = t.ZoneBounds()
	if !end.IsZero() && !end.After(t) {
		end = time.Date(t.UTC().Year()+1, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return start, end
}

// repeatedUntil returns the wall time up to which a period that began with
// a backward jump repeats wall times already shown (the jump's own wall
// time when it was no backward jump).
func (c Cron) repeatedUntil(periodStart time.Time, o int64) int64 {
	jump := periodStart.Unix()
	_, before := time.Unix(jump-1, 0).In(c.Location()).Zone()
	return jump + max(int64(before), o)
}

// nextWall returns the first wall time (seconds since 1970 on a clock
// without zones) in [from, limit) the expression matches. It steps a day at
// a time, a month at a time over months the expression leaves out.
func (c Cron) nextWall(from, limit int64) (int64, bool) {
	day := floorDiv(from, secondsPerDay)
	tod := int(from - day*secondsPerDay)
	for day*secondsPerDay < limit {
		date := time.Unix(day*secondsPerDay, 0).UTC()
		y, month, d := date.Date()
		if c.month&(1<<month) == 0 {
			day = time.Date(y, month+1, 1, 0, 0, 0, 0, time.UTC).Unix() / secondsPerDay
			tod = 0
			continue
		}
		if c.dayMatches(month, d, date.Weekday()) {
			if s, ok := c.timeAtOrAfter(tod); ok {
				w := day*secondsPerDay + int64(s)
				return w, w < limit
			}
		}
		day++
		tod = 0
	}
	return 0, false
}

// prevWall returns the last wall time in [low, to] the expression matches.
func (c Cron) prevWall(to, low int64) (int64, bool) {
	day := floorDiv(to, secondsPerDay)
	tod := int(to - day*secondsPerDay)
	for (day+1)*secondsPerDay > low {
		date := time.Unix(day*secondsPerDay, 0).UTC()
		y, month, d := date.Date()
		if c.month&(1<<month) == 0 {
			day = time.Date(y, month, 1, 0, 0, 0, 0, time.UTC).Unix()/secondsPerDay - 1
			tod = secondsPerDay - 1
			continue
		}
		if c.dayMatches(month, d, date.Weekday()) {
			if s, ok := c.timeAtOrBefore(tod); ok {
				w := day*secondsPerDay + int64(s)
				return w, w >= low
			}
		}
		day--
		tod = secondsPerDay - 1
	}
	return 0, false
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
