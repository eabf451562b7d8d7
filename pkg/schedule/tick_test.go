package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	at := func(s string) time.Time { return mustTime(t, s) }
	daily := func(name, cron string) Schedule {
		return Schedule{Name: name, Cron: cron, DesiredCapacity: ptr(1)}
	}
	created := at("2026-05-01T00:00:00Z")
	tests := []struct {
		name        string
		records     []Record
		now         string
		maxLateness time.Duration
		want        []Decision // Reason compared by substring
		wantErr     string
	}{
		{
			name:    "on time",
			records: []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: created, LastFiredAt: at("2026-05-31T08:00:00Z")}},
			now:     "2026-06-01T08:00:20Z",
			want:    []Decision{{Name: "day", Action: ActionFire, FireAt: at("2026-06-01T08:00:00Z"), Late: 20 * time.Second}},
		},
		{
			name:    "already fired",
			records: []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: created, LastFiredAt: at("2026-06-01T08:00:00Z")}},
			now:     "2026-06-01T08:01:00Z",
		},
		{
			name:    "not yet",
			records: []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: created, LastFiredAt: at("2026-05-31T08:00:00Z")}},
			now:     "2026-06-01T07:59:59Z",
		},
		{
			name:        "five minutes late fires once",
			records:     []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: created, LastFiredAt: at("2026-05-31T08:00:00Z")}},
			now:         "2026-06-01T08:05:00Z",
			maxLateness: 10 * time.Minute,
			want:        []Decision{{Name: "day", Action: ActionFire, FireAt: at("2026-06-01T08:00:00Z"), Late: 5 * time.Minute}},
		},
		{
			name:        "every minute, five minutes of missed ticks: once, for the latest",
			records:     []Record{{Schedule: daily("often", "* * * * *"), CreatedAt: created, LastFiredAt: at("2026-06-01T08:00:00Z")}},
			now:         "2026-06-01T08:05:30Z",
			maxLateness: time.Minute,
			want:        []Decision{{Name: "often", Action: ActionFire, FireAt: at("2026-06-01T08:05:00Z"), Late: 30 * time.Second}},
		},
		{
			name:        "past the maximum lateness: skipped",
			records:     []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: created, LastFiredAt: at("2026-05-31T08:00:00Z")}},
			now:         "2026-06-01T08:20:00Z",
			maxLateness: 15 * time.Minute,
			want: []Decision{{Name: "day", Action: ActionSkip, FireAt: at("2026-06-01T08:00:00Z"), Late: 20 * time.Minute,
				Reason: "due at 2026-06-01T08:00:00Z, 20m0s ago, more than the maximum lateness of 15m0s"}},
		},
		{
			name:    "default maximum lateness",
			records: []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: created, LastFiredAt: at("2026-05-31T08:00:00Z")}},
			now:     "2026-06-01T08:16:00Z",
			want: []Decision{{Name: "day", Action: ActionSkip, FireAt: at("2026-06-01T08:00:00Z"), Late: 16 * time.Minute,
				Reason: "maximum lateness of 15m0s"}},
		},
		{
			name:    "exactly the maximum lateness still fires",
			records: []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: created, LastFiredAt: at("2026-05-31T08:00:00Z")}},
			now:     "2026-06-01T08:15:00Z",
			want:    []Decision{{Name: "day", Action: ActionFire, FireAt: at("2026-06-01T08:00:00Z"), Late: 15 * time.Minute}},
		},
		{
			name:    "days without ticks: the latest, skipped once",
			records: []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: created, LastFiredAt: at("2026-05-20T08:00:00Z")}},
			now:     "2026-06-01T12:00:00Z",
			want:    []Decision{{Name: "day", Action: ActionSkip, FireAt: at("2026-06-01T08:00:00Z"), Late: 4 * time.Hour, Reason: "missed"}},
		},
		{
			name:    "new schedule: nothing before it was created",
			records: []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: at("2026-06-01T08:00:30Z")}},
			now:     "2026-06-01T08:01:00Z",
		},
		{
			name:    "new schedule: fires for times after it was created",
			records: []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: at("2026-06-01T07:59:00Z")}},
			now:     "2026-06-01T08:00:10Z",
			want:    []Decision{{Name: "day", Action: ActionFire, FireAt: at("2026-06-01T08:00:00Z"), Late: 10 * time.Second}},
		},
		{
			name:    "recreated after a delete: the old fire time doesn't count",
			records: []Record{{Schedule: daily("day", "0 8 * * *"), CreatedAt: at("2026-06-01T08:00:30Z"), LastFiredAt: at("2026-05-31T08:00:00Z")}},
			now:     "2026-06-01T08:01:00Z",
		},
		{
			name:    "last fired in the future (clock skew): nothing",
			records: []Record{{Schedule: daily("day", "* * * * *"), CreatedAt: created, LastFiredAt: at("2026-06-01T08:10:00Z")}},
			now:     "2026-06-01T08:05:00Z",
		},
		{
			name: "several: by fire time, then name",
			records: []Record{
				{Schedule: daily("b", "0 8 * * *"), CreatedAt: at("2026-06-01T07:00:00Z")},
				{Schedule: daily("late", "30 7 * * *"), CreatedAt: at("2026-06-01T07:00:00Z")},
				{Schedule: daily("a", "0 8 * * *"), CreatedAt: at("2026-06-01T07:00:00Z")},
				{Schedule: daily("idle", "0 9 * * *"), CreatedAt: at("2026-06-01T07:00:00Z")},
			},
			now:         "2026-06-01T08:00:05Z",
			maxLateness: time.Hour,
			want: []Decision{
				{Name: "late", Action: ActionFire, FireAt: at("2026-06-01T07:30:00Z"), Late: 30*time.Minute + 5*time.Second},
				{Name: "a", Action: ActionFire, FireAt: at("2026-06-01T08:00:00Z"), Late: 5 * time.Second},
				{Name: "b", Action: ActionFire, FireAt: at("2026-06-01T08:00:00Z"), Late: 5 * time.Second},
			},
		},
		{
			name: "time zones and DST: 02:30 Amsterdam fires at 03:00 CEST",
			records: []Record{{Schedule: Schedule{Name: "ams", Cron: "0 30 2 * * *", Timezone: "Europe/Amsterdam", DesiredCapacity: ptr(1)},
				CreatedAt: at("2026-01-01T00:00:00Z"), LastFiredAt: at("2026-03-28T01:30:00Z")}},
			now:  "2026-03-29T01:00:40Z",
			want: []Decision{{Name: "ams", Action: ActionFire, FireAt: at("2026-03-29T01:00:00Z"), Late: 40 * time.Second}},
		},
		{
			name: "a broken record is reported, the others decided",
			records: []Record{
				{Schedule: Schedule{Name: "broken", Cron: "0 8 * *"}, CreatedAt: created},
				{Schedule: Schedule{Name: "zone", Cron: "0 8 * * *", Timezone: "Nowhere/Special"}, CreatedAt: created},
				{Schedule: daily("day", "0 8 * * *"), CreatedAt: created},
			},
			now:     "2026-06-01T08:00:00Z",
			want:    []Decision{{Name: "day", Action: ActionFire, FireAt: at("2026-06-01T08:00:00Z")}},
			wantErr: `schedule "broken": cron: cron "0 8 * *": 4 fields`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decide(tt.records, at(tt.now), tt.maxLateness)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("decisions = %+v, want %+v", got, tt.want)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Name != w.Name || g.Action != w.Action || !g.FireAt.Equal(w.FireAt) || g.Late != w.Late ||
					!strings.Contains(g.Reason, w.Reason) || (w.Reason == "") != (g.Reason == "") {
					t.Errorf("decision %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// TestDecideThenRecord plays ticks against the pure decision, moving
// LastFiredAt as a store's ClaimFire or RecordSkip would: each fire time is
// dealt with once, however the ticks fall.
func TestDecideThenRecord(t *testing.T) {
	r := Record{
		Schedule:  Schedule{Name: "often", Cron: "*/5 * * * *", DesiredCapacity: ptr(1)},
		CreatedAt: mustTime(t, "2026-06-01T07:58:00Z"),
	}
	ticks := []struct {
		now  string
		want string // "" for nothing, else action@fireAt
	}{
		{"2026-06-01T07:59:00Z", ""},
		{"2026-06-01T08:00:01Z", "fire@08:00:00"},
		{"2026-06-01T08:00:01Z", ""}, // a duplicate delivery of the same tick
		{"2026-06-01T08:01:00Z", ""},
		{"2026-06-01T08:12:00Z", "fire@08:10:00"}, // late: 08:05 and 08:10 missed, fired once
		{"2026-06-01T08:14:00Z", ""},
		{"2026-06-01T09:54:00Z", "skip@09:50:00"}, // 4m late, more than 3m
		{"2026-06-01T09:54:30Z", ""},
		{"2026-06-01T09:55:30Z", "fire@09:55:00"},
	}
	for _, tick := range ticks {
		ds, err := Decide([]Record{r}, mustTime(t, tick.now), 3*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(ds) == 1 {
			got = string(ds[0].Action) + "@" + ds[0].FireAt.UTC().Format("15:04:05")
			r.LastFiredAt = ds[0].FireAt
		}
		if got != tick.want {
			t.Errorf("tick at %s: %q, want %q", tick.now, got, tick.want)
		}
	}
}
