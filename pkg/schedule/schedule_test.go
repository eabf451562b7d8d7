package schedule

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// designExample is the schedule of the design document.
const designExample = `{"name": "daytime", "cron": "0 0 8 * * 1-5", "timezone": "Europe/Amsterdam",
 "description": "Switch to full capacity during day time",
 "desiredCapacity": 5,
 "nodeGroups": [{"name": "workers", "desired": 5, "min": 3, "max": 10}],
 "appScaleTemplates": [{"app": "todo", "replicas": 5}],
 "apps": [{"namespace": "default", "kind": "Deployment", "name": "todo", "replicas": 5}]}`

func TestParseScalerdFile(t *testing.T) {
	data, err := os.ReadFile("testdata/daytime.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := Schedule{
		Name:              "daytime",
		Cron:              "0 0 8 * * *",
		Description:       "Switch to full capacity during day time",
		DesiredCapacity:   ptr(5),
		AppScaleTemplates: []AppScaleTemplate{{App: "todo", Replicas: ptr[int32](5)}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("Parse = %+v, want %+v", s, want)
	}
	if err := Validate(s, []string{"workers"}); err != nil {
		t.Errorf("Validate: %v", err)
	}
	c, err := s.ParseCron()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Next(mustTime(t, "2026-06-01T09:00:00Z")); got.Format("2006-01-02T15:04:05Z07:00") != "2026-06-02T08:00:00Z" {
		t.Errorf("Next = %s, want 08:00 UTC the next day", got)
	}
	// Encoding gives the same document back: same fields, nothing added.
	enc, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, enc, data) {
		t.Errorf("re-encoded as %s, want the file's document", enc)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestParseRoundTrips(t *testing.T) {
	for _, doc := range []string{
		designExample,
		`{"name": "night", "cron": "0 22 * * *", "desiredCapacity": 0}`,
		`{"name": "empty-lists", "cron": "0 22 * * *", "nodeGroups": [], "apps": []}`,
		`{"name": "zero", "cron": "0 22 * * *", "nodeGroups": [{"name": "g", "min": 0, "max": 0, "desired": 0}]}`,
	} {
		s, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("Parse(%s): %v", doc, err)
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, enc, []byte(doc)) {
			t.Errorf("re-encoded %s as %s", doc, enc)
		}
		again, err := Parse(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, s) {
			t.Errorf("decoded again as %+v, want %+v", again, s)
		}
	}
}

func TestParseIsStrict(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unknown field", `{"name": "a", "cron": "* * * * *", "replicas": 3}`, `replicas: unknown field`},
		{"unknown nested field", `{"name": "a", "nodeGroups": [{"name": "g"}, {"name": "h", "desird": 3}]}`, `nodeGroups[1].desird: unknown field`},
		{"unknown app field", `{"name": "a", "apps": [{"namespace": "x", "replica": 3}]}`, `apps[0].replica: unknown field`},
		{"other case", `{"Name": "a"}`, `Name: unknown field`},
		{"repeated field", `{"name": "a", "name": "b"}`, `name: field given twice`},
		{"trailing document", `{"name": "a"} {"name": "b"}`, `unexpected data after the document`},
		{"trailing garbage", `{"name": "a"} x`, `after the document`},
		{"not an object", `["name"]`, `want a JSON object`},
		{"null", `null`, `want a JSON object`},
		{"empty", ``, `unexpected end of input`},
		{"truncated", `{"name": "a"`, `unexpected end of input`},
		{"string number", `{"desiredCapacity": "5"}`, `desiredCapacity: got a string, want int`},
		{"fraction", `{"desiredCapacity": 2.5}`, `desiredCapacity: got a number 2.5, want int`},
		{"nested type", `{"nodeGroups": [{"name": "g", "min": true}]}`, `nodeGroups[0].min: got a bool`},
		{"object for a list", `{"nodeGroups": {"name": "g"}}`, `nodeGroups: want a JSON array`},
		{"scalar for an element", `{"apps": [5]}`, `apps[0]: want a JSON object`},
		{"overflow", `{"apps": [{"replicas": 3000000000}]}`, `apps[0].replicas: got a number 3000000000, want int32`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse(%s) succeeded, want an error containing %q", tt.doc, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseList(t *testing.T) {
	one, err := ParseList([]byte("\n  " + designExample))
	if err != nil || len(one) != 1 || one[0].Name != "daytime" {
		t.Fatalf("ParseList(one document) = %+v, %v", one, err)
	}
	two, err := ParseList([]byte(`[{"name": "a", "cron": "0 8 * * *", "desiredCapacity": 3},
		{"name": "b", "cron": "0 20 * * *", "desiredCapacity": 1}]`))
	if err != nil || len(two) != 2 || two[1].Name != "b" {
		t.Fatalf("ParseList(array) = %+v, %v", two, err)
	}
	if err := ValidateList(two, nil); err != nil {
		t.Errorf("ValidateList: %v", err)
	}
	empty, err := ParseList([]byte(`[]`))
	if err != nil || len(empty) != 0 {
		t.Errorf("ParseList([]) = %+v, %v", empty, err)
	}
	_, err = ParseList([]byte(`[{"name": "a"}, {"name": "b", "crn": "x"}]`))
	if err == nil || !strings.Contains(err.Error(), "[1].crn: unknown field") {
		t.Errorf("ParseList with a bad element: err = %v, want it to name [1].crn", err)
	}
	_, err = ParseList([]byte(`[{"name": "a"}] [`))
	if err == nil {
		t.Errorf("ParseList with trailing data succeeded")
	}
}

// fields returns the fields a validation error names.
func fields(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v (%T), want a *ValidationError", err, err)
	}
	var out []string
	for _, p := range ve.Problems {
		out = append(out, p.Field)
	}
	slices.Sort(out)
	return out
}

func TestValidate(t *testing.T) {
	valid := func() Schedule {
		s, err := Parse([]byte(designExample))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	known := []string{"workers", "gpu"}
	tests := []struct {
		name   string
		edit   func(*Schedule)
		known  []string
		fields []string // every field named, sorted
		want   string   // in the message
	}{
		{name: "valid", edit: func(*Schedule) {}},
		{name: "valid without known groups", edit: func(s *Schedule) { s.NodeGroups[0].Name = "anything" }, known: nil},
		{name: "valid with only min and max", edit: func(s *Schedule) { s.NodeGroups[0].Desired = nil }},
		{name: "empty name", edit: func(s *Schedule) { s.Name = "" }, fields: []string{"name"}, want: "name: is empty"},
		{name: "name with a hash", edit: func(s *Schedule) { s.Name = "day#time" }, fields: []string{"name"}, want: "must start with a letter or digit"},
		{name: "name with a space", edit: func(s *Schedule) { s.Name = "day time" }, fields: []string{"name"}},
		{name: "name starting with a dash", edit: func(s *Schedule) { s.Name = "-day" }, fields: []string{"name"}},
		{name: "name too long", edit: func(s *Schedule) { s.Name = strings.Repeat("a", MaxNameLength+1) }, fields: []string{"name"}},
		{name: "name at the limit", edit: func(s *Schedule) { s.Name = strings.Repeat("a", MaxNameLength) }},
		{name: "name with dots and underscores", edit: func(s *Schedule) { s.Name = "Week_day.8-00" }},
		{name: "empty cron", edit: func(s *Schedule) { s.Cron = " " }, fields: []string{"cron"}, want: "cron: is empty"},
		{name: "bad cron", edit: func(s *Schedule) { s.Cron = "0 0 25 * * *" }, fields: []string{"cron"}, want: `hour "25": 25 is out of range 0-23`},
		{name: "unknown zone", edit: func(s *Schedule) { s.Timezone = "Europe/Atlantis" }, fields: []string{"timezone"}, want: `unknown time zone "Europe/Atlantis"`},
		{name: "bad zone and cron", edit: func(s *Schedule) { s.Timezone = "Local"; s.Cron = "61 * * * *" }, fields: []string{"cron", "timezone"}},
		{name: "negative capacity", edit: func(s *Schedule) { s.DesiredCapacity = ptr(-1) }, fields: []string{"desiredCapacity"}, want: "-1 is negative"},
		{name: "nothing to do", edit: func(s *Schedule) {
			s.DesiredCapacity, s.NodeGroups, s.AppScaleTemplates, s.Apps = nil, nil, nil, nil
		}, fields: []string{"desiredCapacity, nodeGroups, appScaleTemplates, apps"}, want: "would do nothing"},
		{name: "capacity zero is something", edit: func(s *Schedule) {
			s.DesiredCapacity, s.NodeGroups, s.AppScaleTemplates, s.Apps = ptr(0), nil, nil, nil
		}},
		{name: "unknown group", edit: func(s *Schedule) { s.NodeGroups[0].Name = "wrokers" }, known: known,
			fields: []string{"nodeGroups[0].name"}, want: `unknown node group "wrokers" (the configuration has workers, gpu)`},
		{name: "no groups configured", edit: func(*Schedule) {}, known: []string{},
			fields: []string{"nodeGroups[0].name"}, want: "the configuration has none"},
		{name: "empty group name", edit: func(s *Schedule) { s.NodeGroups[0].Name = "" }, fields: []string{"nodeGroups[0].name"}},
		{name: "group twice", edit: func(s *Schedule) {
			s.NodeGroups = append(s.NodeGroups, NodeGroup{Name: "workers", Max: ptr(4)})
		}, fields: []string{"nodeGroups[1].name"}, want: `"workers" is also set by nodeGroups[0]`},
		{name: "group without sizes", edit: func(s *Schedule) { s.NodeGroups[0] = NodeGroup{Name: "workers"} },
			fields: []string{"nodeGroups[0]"}, want: "sets none of desired, min and max"},
		{name: "negative sizes", edit: func(s *Schedule) {
			s.NodeGroups[0] = NodeGroup{Name: "workers", Desired: ptr(-1), Min: ptr(-2), Max: ptr(-3)}
		}, fields: []string{"nodeGroups[0].desired", "nodeGroups[0].max", "nodeGroups[0].min"}},
		{name: "min above max", edit: func(s *Schedule) { s.NodeGroups[0].Min, s.NodeGroups[0].Max = ptr(5), ptr(4) },
			fields: []string{"nodeGroups[0].min"}, want: "5 is greater than max 4"},
		{name: "desired below min", edit: func(s *Schedule) { s.NodeGroups[0].Desired = ptr(2) },
			fields: []string{"nodeGroups[0].desired"}, want: "2 is below min 3"},
		{name: "desired above max", edit: func(s *Schedule) { s.NodeGroups[0].Desired = ptr(11) },
			fields: []string{"nodeGroups[0].desired"}, want: "11 is above max 10"},
		{name: "desired above max without min", edit: func(s *Schedule) {
			s.NodeGroups[0] = NodeGroup{Name: "workers", Desired: ptr(11), Max: ptr(10)}
		}, fields: []string{"nodeGroups[0].desired"}},
		{name: "app template without replicas", edit: func(s *Schedule) { s.AppScaleTemplates[0].Replicas = nil },
			fields: []string{"appScaleTemplates[0].replicas"}, want: "is missing"},
		{name: "app template bad", edit: func(s *Schedule) {
			s.AppScaleTemplates = append(s.AppScaleTemplates,
				AppScaleTemplate{App: "", Replicas: ptr[int32](-1)},
				AppScaleTemplate{App: "todo", Replicas: ptr[int32](1)},
				AppScaleTemplate{App: "not a label!", Replicas: ptr[int32](1)})
		}, fields: []string{"appScaleTemplates[1].app", "appScaleTemplates[1].replicas", "appScaleTemplates[2].app", "appScaleTemplates[3].app"}},
		{name: "bad kind", edit: func(s *Schedule) { s.Apps[0].Kind = "deployment" },
			fields: []string{"apps[0].kind"}, want: `"deployment" is neither Deployment nor StatefulSet`},
		{name: "statefulset", edit: func(s *Schedule) { s.Apps[0].Kind = KindStatefulSet }},
		{name: "app bad", edit: func(s *Schedule) {
			s.Apps[0] = App{Namespace: "Default", Kind: "Job", Name: "To_do", Replicas: ptr[int32](-2)}
		}, fields: []string{"apps[0].kind", "apps[0].name", "apps[0].namespace", "apps[0].replicas"}},
		{name: "app empty", edit: func(s *Schedule) { s.Apps[0] = App{} },
			fields: []string{"apps[0].kind", "apps[0].name", "apps[0].namespace", "apps[0].replicas"}},
		{name: "app twice", edit: func(s *Schedule) { s.Apps = append(s.Apps, s.Apps[0]) },
			fields: []string{"apps[1]"}, want: "Deployment default/todo is also scaled by apps[0]"},
		{name: "everything at once", edit: func(s *Schedule) {
			s.Name, s.Cron, s.Timezone, s.DesiredCapacity = "", "nope", "Nowhere/Special", ptr(-5)
		}, fields: []string{"cron", "desiredCapacity", "name", "timezone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid()
			tt.edit(&s)
			knownGroups := tt.known
			if knownGroups == nil && tt.name != "valid without known groups" {
				knownGroups = known
			}
			err := Validate(s, knownGroups)
			if got := fields(t, err); !slices.Equal(got, tt.fields) {
				t.Errorf("fields = %q, want %q (err %v)", got, tt.fields, err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestValidationErrorUnwraps(t *testing.T) {
	s := Schedule{Name: "x", Cron: "0 0 30 2 *", DesiredCapacity: ptr(1)}
	err := Validate(s, nil)
	var ce *CronError
	if !errors.As(err, &ce) || ce.Field != "day-of-month" {
		t.Errorf("errors.As(*CronError) on %v = %+v", err, ce)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "cron" {
		t.Errorf("errors.As(*FieldError) on %v = %+v", err, fe)
	}
}

func TestValidateList(t *testing.T) {
	list := []Schedule{
		{Name: "day", Cron: "0 8 * * *", DesiredCapacity: ptr(5)},
		{Name: "night", Cron: "0 20 * * *", DesiredCapacity: ptr(1)},
		{Name: "day", Cron: "0 9 * * *", DesiredCapacity: ptr(5)},
		{Name: "", Cron: "bad"},
	}
	err := ValidateList(list, nil)
	want := []string{"[2].name", "[3].cron", "[3].desiredCapacity, nodeGroups, appScaleTemplates, apps", "[3].name"}
	if got := fields(t, err); !slices.Equal(got, want) {
		t.Errorf("fields = %q, want %q", got, want)
	}
	if !strings.Contains(err.Error(), `[2].name: "day" is also the name of [0]`) {
		t.Errorf("err = %v, want the duplicate named", err)
	}
}

func TestClone(t *testing.T) {
	s, err := Parse([]byte(designExample))
	if err != nil {
		t.Fatal(err)
	}
	c := s.Clone()
	if !reflect.DeepEqual(c, s) {
		t.Fatalf("Clone = %+v, want %+v", c, s)
	}
	*c.DesiredCapacity = 9
	*c.NodeGroups[0].Min = 9
	*c.AppScaleTemplates[0].Replicas = 9
	*c.Apps[0].Replicas = 9
	c.NodeGroups[0].Name = "changed"
	if *s.DesiredCapacity != 5 || *s.NodeGroups[0].Min != 3 || *s.AppScaleTemplates[0].Replicas != 5 ||
		*s.Apps[0].Replicas != 5 || s.NodeGroups[0].Name != "workers" {
		t.Errorf("changing the clone changed the original: %+v", s)
	}
}
