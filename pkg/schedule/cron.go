package schedule

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Cron is a parsed cron expression bound to a time zone. Its fire times are
// whole seconds; see Next for how daylight-saving transitions are handled.
// The zero Cron never fires; use ParseCron.
type Cron struct {
	expr string
	loc  *time.Location

	// Bit i is set when value i is allowed.
	sec, min, hour uint64
	dom            uint64 // bits 1..31
	month          uint64 // bits 1..12
	dow            uint64 // bits 0..6, Sunday = 0

	// domStar and dowStar record that the field was written starting with
	// "*" (or was "?"): cron's rule is that days match on day-of-month OR
	// day-of-week only when both are restricted, otherwise on both.
	domStar, dowStar bool

	// fixed means no time-of-day field (second, minute, hour) was written
	// with "*": the expression names particular wall-clock times, each of
	// which fires once per day even when the clock falls back and shows it
	// twice. Expressions with a "*" time field describe a rhythm and fire at
	// every instant the clock matches.
	fixed bool
}

// CronError reports a cron expression that does not parse, naming the
// field and why.
type CronError struct {
	Expr  string // the whole expression
	Field string // "second", "minute", "hour", "day-of-month", "month", "day-of-week"; empty for the expression as a whole
	Text  string // the field's text
	Err   error
}

func (e *CronError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("cron %q: %v", e.Expr, e.Err)
	}
	return fmt.Sprintf("cron %q: %s %q: %v", e.Expr, e.Field, e.Text, e.Err)
}

func (e *CronError) Unwrap() error { return e.Err }

// fieldSpec describes one position of a cron expression.
type fieldSpec struct {
	name     string
	min, max int
	// starMax is the top of "*": day-of-week accepts 7 for Sunday, but "*"
	// spans 0-6 so "*/2" doesn't list Sunday twice.
	starMax int
	// names holds the field's English three-letter names, concatenated,
	// the first standing for min.
	names string
	// question allows "?" (Quartz and scalerd's parser accept it for the
	// day fields) as "*".
	question bool
}

// The six positions, seconds first; five-field expressions get "0" seconds.
const (
	posSecond = iota
	posMinute
	posHour
	posDOM
	posMonth
	posDOW
	positions
)

func fieldSpecs() [positions]fieldSpec {
	return [positions]fieldSpec{
		posSecond: {name: "second", min: 0, max: 59, starMax: 59},
		posMinute: {name: "minute", min: 0, max: 59, starMax: 59},
		posHour:   {name: "hour", min: 0, max: 23, starMax: 23},
		posDOM:    {name: "day-of-month", min: 1, max: 31, starMax: 31, question: true},
		posMonth:  {name: "month", min: 1, max: 12, starMax: 12, names: "janfebmaraprmayjunjulaugsepoctnovdec"},
		posDOW:    {name: "day-of-week", min: 0, max: 7, starMax: 6, question: true, names: "sunmontuewedthufrisat"},
	}
}

// lookupName returns the value of a month or weekday name.
func (f fieldSpec) lookupName(text string) (int, bool) {
	if len(text) != 3 {
		return 0, false
	}
	text = strings.ToLower(text)
	for i := 0; i+3 <= len(f.names); i += 3 {
		if f.names[i:i+3] == text {
			return f.min + i/3, true
		}
	}
	return 0, false
}

// descriptor expands the @-shorthands of common crons.
func descriptor(name string) (string, bool) {
	switch strings.ToLower(name) {
	case "@yearly", "@annually":
		return "0 0 1 1 *", true
	case "@monthly":
		return "0 0 1 * *", true
	case "@weekly":
		return "0 0 * * 0", true
	case "@daily", "@midnight":
		return "0 0 * * *", true
	case "@hourly":
		return "0 * * * *", true
	}
	return "", false
}

// maxDays is the most days a month can have (February in leap years).
func maxDays(month int) int {
	switch month {
	case 2:
		return 29
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// ParseCron parses expr in loc (nil means UTC). It takes five fields
// (minute hour day-of-month month day-of-week), six (second first, as
// scalerd's schedules), or one of @yearly, @annually, @monthly, @weekly,
// @daily, @midnight and @hourly. A field is "*", or a comma-separated list
// of values, ranges "a-b" and steps "*/n", "a-b/n" or "a/n" (a to the
// field's maximum). Months and days of the week also take English
// three-letter names, in any case; day-of-week 0 and 7 are both Sunday.
// The day fields also take "?" for "*". When both day fields are
// restricted (neither starts with "*" or is "?"), a day matches if either
// does, as in every cron since Vixie's; otherwise it must match both.
//
// An expression that can never fire (such as February 30) is an error.
func ParseCron(expr string, loc *time.Location) (Cron, error) {
	if loc == nil {
		loc = time.UTC
	}
	fields := strings.Fields(expr)
	if len(fields) == 1 && strings.HasPrefix(fields[0], "@") {
		d, ok := descriptor(fields[0])
		if !ok {
			return Cron{}, &CronError{Expr: expr, Err: fmt.Errorf("unknown descriptor %s (want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)", fields[0])}
		}
		fields = strings.Fields(d)
	}
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	case 0:
		return Cron{}, &CronError{Expr: expr, Err: errors.New("empty expression")}
	default:
		return Cron{}, &CronError{Expr: expr, Err: fmt.Errorf("%d fields, want 5 (minute hour day-of-month month day-of-week) or 6 (second first)", len(fields))}
	}

	c := Cron{expr: expr, loc: loc}
	specs := fieldSpecs()
	sets := [positions]*uint64{&c.sec, &c.min, &c.hour, &c.dom, &c.month, &c.dow}
	for i, text := range fields {
		set, err := parseField(text, specs[i])
		if err != nil {
			return Cron{}, &CronError{Expr: expr, Field: specs[i].name, Text: text, Err: err}
		}
		*sets[i] = set
	}
	starred := func(text string) bool { return strings.HasPrefix(text, "*") || text == "?" }
	c.domStar, c.dowStar = starred(fields[posDOM]), starred(fields[posDOW])
	c.fixed = !starred(fields[posSecond]) && !starred(fields[posMinute]) && !starred(fields[posHour])

	if err := c.checkReachable(fields[posMonth]); err != nil {
		return Cron{}, &CronError{Expr: expr, Field: specs[posDOM].name, Text: fields[posDOM], Err: err}
	}
	return c, nil
}

// checkReachable rejects day-of-month and month combinations that no
// calendar has. Only day-of-month can be unreachable: when day-of-week is
// restricted too, either matches; when day-of-month starts with "*" it
// includes the 1st, which falls on every weekday in time.
func (c Cron) checkReachable(monthText string) error {
	if !c.dowStar {
		return nil
	}
	for m := 1; m <= 12; m++ {
		if c.month&(1<<m) != 0 && c.dom&(1<<(maxDays(m)+1)-1) != 0 {
			return nil
		}
	}
	return fmt.Errorf("never occurs: no month of %q has such a day, so the expression would never fire", monthText)
}

// parseField returns the bit set of the values a field allows.
func parseField(text string, spec fieldSpec) (uint64, error) {
	if text == "?" {
		if !spec.question {
			return 0, fmt.Errorf(`"?" is only allowed in day-of-month and day-of-week`)
		}
		return span(spec.min, spec.starMax, 1), nil
	}
	var set uint64
	for item := range strings.SplitSeq(text, ",") {
		s, err := parseItem(item, spec)
		if err != nil {
			return 0, err
		}
		set |= s
	}
	if spec.max == 7 && set&(1<<7) != 0 {
		set = set&^(1<<7) | 1 // 7 is Sunday as well as 0
	}
	return set, nil
}

// parseItem parses one list item: "*", a value, a range, each with an
// optional step.
func parseItem(item string, spec fieldSpec) (uint64, error) {
	if item == "" {
		return 0, fmt.Errorf("empty list item")
	}
	rng, stepText, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 || !isDigits(stepText) {
			return 0, fmt.Errorf("step %q is not a positive whole number", stepText)
		}
		if n > spec.max-spec.min+1 {
			return 0, fmt.Errorf("step %d is larger than the field's range %d-%d", n, spec.min, spec.max)
		}
		step = n
	}
	var lo, hi int
	switch {
	case rng == "*":
		lo, hi = spec.min, spec.starMax
	case strings.Contains(rng, "-"):
		a, b, _ := strings.Cut(rng, "-")
		var err error
		if lo, err = parseValue(a, spec); err != nil {
			return 0, err
		}
		if hi, err = parseValue(b, spec); err != nil {
			return 0, err
		}
		if lo > hi {
			return 0, fmt.Errorf("range %s runs backwards (%d > %d)", rng, lo, hi)
		}
	default:
		v, err := parseValue(rng, spec)
		if err != nil {
			return 0, err
		}
		lo, hi = v, v
		if hasStep {
			hi = spec.max // "a/n" means from a to the end, every n
		}
	}
	return span(lo, hi, step), nil
}

// parseValue reads a number or, in fields that have them, a name.
func parseValue(text string, spec fieldSpec) (int, error) {
	if v, ok := spec.lookupName(text); ok {
		return v, nil
	}
	if !isDigits(text) {
		if text == "" {
			return 0, fmt.Errorf("missing value")
		}
		if spec.names != "" {
			return 0, fmt.Errorf("%q is neither a number nor a %s name", text, spec.name)
		}
		return 0, fmt.Errorf("%q is not a number", text)
	}
	v, err := strconv.Atoi(text)
	if err != nil || v < spec.min || v > spec.max {
		return 0, fmt.Errorf("%s is out of range %d-%d", text, spec.min, spec.max)
	}
	return v, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// span is the set lo, lo+step, … up to hi.
func span(lo, hi, step int) uint64 {
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << v
	}
	return set
}

// String returns the expression as written.
func (c Cron) String() string { return c.expr }

// Location returns the time zone the expression is read in.
func (c Cron) Location() *time.Location {
	if c.loc == nil {
		return time.UTC
	}
	return c.loc
}

// dayMatches applies the day-of-month / day-of-week rule to a date.
func (c Cron) dayMatches(month time.Month, day int, wd time.Weekday) bool {
	if c.month&(1<<month) == 0 {
		return false
	}
	domOK, dowOK := c.dom&(1<<day) != 0, c.dow&(1<<wd) != 0
	if c.domStar || c.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// matchesWall reports whether a wall-clock reading (a time whose fields are
// read as they are, whatever its location) matches every field.
func (c Cron) matchesWall(t time.Time) bool {
	_, month, day := t.Date()
	h, m, s := t.Clock()
	return c.dayMatches(month, day, t.Weekday()) &&
		c.hour&(1<<h) != 0 && c.min&(1<<m) != 0 && c.sec&(1<<s) != 0
}

// nextBit returns the smallest member of set that is >= from.
func nextBit(set uint64, from int) (int, bool) {
	if from > 63 {
		return 0, false
	}
	m := set & (^uint64(0) << from)
	if m == 0 {
		return 0, false
	}
	return bits.TrailingZeros64(m), true
}

// prevBit returns the largest member of set that is <= upTo.
func prevBit(set uint64, upTo int) (int, bool) {
	if upTo < 0 {
		return 0, false
	}
	m := set
	if upTo < 63 {
		m &= uint64(2)<<upTo - 1
	}
	if m == 0 {
		return 0, false
	}
	return 63 - bits.LeadingZeros64(m), true
}

// timeAtOrAfter returns the first second of the day (counted from
// midnight) at or after tod whose hour, minute and second match.
func (c Cron) timeAtOrAfter(tod int) (int, bool) {
	h, m, s := tod/3600, tod/60%60, tod%60
	first := func(set uint64) int { v, _ := nextBit(set, 0); return v }
	if hh, ok := nextBit(c.hour, h); !ok {
		return 0, false
	} else if hh > h {
		return hh*3600 + first(c.min)*60 + first(c.sec), true
	}
	if mm, ok := nextBit(c.min, m); ok {
		if mm > m {
			return h*3600 + mm*60 + first(c.sec), true
		}
		if ss, ok := nextBit(c.sec, s); ok {
			return h*3600 + m*60 + ss, true
		}
		if mm, ok := nextBit(c.min, m+1); ok {
			return h*3600 + mm*60 + first(c.sec), true
		}
	}
	hh, ok := nextBit(c.hour, h+1)
	if !ok {
		return 0, false
	}
	return hh*3600 + first(c.min)*60 + first(c.sec), true
}

// timeAtOrBefore is timeAtOrAfter's mirror: the last matching second of
// the day at or before tod.
func (c Cron) timeAtOrBefore(tod int) (int, bool) {
	h, m, s := tod/3600, tod/60%60, tod%60
	last := func(set uint64) int { v, _ := prevBit(set, 63); return v }
	if hh, ok := prevBit(c.hour, h); !ok {
		return 0, false
	} else if hh < h {
		return hh*3600 + last(c.min)*60 + last(c.sec), true
	}
	if mm, ok := prevBit(c.min, m); ok {
		if mm < m {
			return h*3600 + mm*60 + last(c.sec), true
		}
		if ss, ok := prevBit(c.sec, s); ok {
			return h*3600 + m*60 + ss, true
		}
		if mm, ok := prevBit(c.min, m-1); ok {
			return h*3600 + mm*60 + last(c.sec), true
		}
	}
	hh, ok := prevBit(c.hour, h-1)
	if !ok {
		return 0, false
	}
	return hh*3600 + last(c.min)*60 + last(c.sec), true
}
