package schedule

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxNameLength bounds a schedule's name, which is part of a storage key.
const MaxNameLength = 128

// FieldError is one problem with a schedule; Field names where, as
// "cron", "nodeGroups[1].min" or, in a list, "[2].name".
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// ValidationError lists every problem Validate or ValidateList found, so a
// user fixes a document in one go.
type ValidationError struct {
	Problems []*FieldError
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return "invalid schedule: " + strings.Join(msgs, "; ")
}

// Unwrap gives errors.Is and errors.As every problem.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// problems collects FieldErrors.
type problems []*FieldError

func (ps *problems) add(field string, format string, args ...any) {
	*ps = append(*ps, &FieldError{Field: field, Err: fmt.Errorf(format, args...)})
}

func (ps *problems) addErr(field string, err error) {
	*ps = append(*ps, &FieldError{Field: field, Err: err})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// Validate checks one schedule and returns a *ValidationError listing every
// problem, or nil. knownGroups, when not nil, are the node groups the
// configuration defines; a nodeGroups entry naming another is a problem.
func Validate(s Schedule, knownGroups []string) error {
	var ps problems
	validate(&ps, "", s, knownGroups)
	return ps.err()
}

// ValidateList checks each schedule of a list and that no two share a
// name. Fields are named after the element, as "[2].cron".
func ValidateList(list []Schedule, knownGroups []string) error {
	var ps problems
	first := map[string]int{}
	for i, s := range list {
		at := "[" + strconv.Itoa(i) + "]."
		validate(&ps, at, s, knownGroups)
		if s.Name == "" {
			continue
		}
		if j, dup := first[s.Name]; dup {
			ps.add(at+"name", "%q is also the name of [%d]", s.Name, j)
			continue
		}
		first[s.Name] = i
	}
	return ps.err()
}

func validate(ps *problems, at string, s Schedule, knownGroups []string) {
	validateName(ps, at+"name", s.Name)

	loc, err := LoadLocation(s.Timezone)
	if err != nil {
		ps.addErr(at+"timezone", err)
	}
	if strings.TrimSpace(s.Cron) == "" {
		ps.add(at+"cron", "is empty")
	} else if _, err := ParseCron(s.Cron, loc); err != nil {
		ps.addErr(at+"cron", err)
	}

	nonNegative(ps, at+"desiredCapacity", s.DesiredCapacity)
	if s.DesiredCapacity == nil && len(s.NodeGroups) == 0 && len(s.AppScaleTemplates) == 0 && len(s.Apps) == 0 {
		ps.add(at+"desiredCapacity, nodeGroups, appScaleTemplates, apps", "none is set, so the schedule would do nothing")
	}

	groups := map[string]int{}
	for i, g := range s.NodeGroups {
		field := at + "nodeGroups[" + strconv.Itoa(i) + "]"
		j, dup := groups[g.Name]
		switch {
		case g.Name == "":
			ps.add(field+".name", "is empty")
		case dup:
			ps.add(field+".name", "%q is also set by nodeGroups[%d]", g.Name, j)
		case knownGroups != nil && !slices.Contains(knownGroups, g.Name):
			ps.add(field+".name", "unknown node group %q (the configuration has %s)", g.Name, listOrNone(knownGroups))
		}
		if !dup {
			groups[g.Name] = i
		}
		validateSizes(ps, field, g)
	}

	apps := map[string]int{}
	for i, a := range s.AppScaleTemplates {
		field := at + "appScaleTemplates[" + strconv.Itoa(i) + "]"
		switch j, dup := apps[a.App]; {
		case a.App == "":
			ps.add(field+".app", "is empty")
		case dup:
			ps.add(field+".app", "%q is also scaled by appScaleTemplates[%d]", a.App, j)
		default:
			if msgs := validation.IsValidLabelValue(a.App); len(msgs) > 0 {
				ps.add(field+".app", "%q is not a label value: %s", a.App, strings.Join(msgs, "; "))
			}
			apps[a.App] = i
		}
		replicas(ps, field+".replicas", a.Replicas)
	}

	workloads := map[string]int{}
	for i, a := range s.Apps {
		field := at + "apps[" + strconv.Itoa(i) + "]"
		if a.Namespace == "" {
			ps.add(field+".namespace", "is empty")
		} else if msgs := validation.IsDNS1123Label(a.Namespace); len(msgs) > 0 {
			ps.add(field+".namespace", "%q is not a namespace name: %s", a.Namespace, strings.Join(msgs, "; "))
		}
		if a.Kind != KindDeployment && a.Kind != KindStatefulSet {
			ps.add(field+".kind", "%q is neither %s nor %s", a.Kind, KindDeployment, KindStatefulSet)
		}
		if a.Name == "" {
			ps.add(field+".name", "is empty")
		} else if msgs := validation.IsDNS1123Subdomain(a.Name); len(msgs) > 0 {
			ps.add(field+".name", "%q is not a workload name: %s", a.Name, strings.Join(msgs, "; "))
		}
		key := a.Namespace + "/" + string(a.Kind) + "/" + a.Name
		if j, dup := workloads[key]; !dup {
			workloads[key] = i
		} else if a.Name != "" {
			ps.add(field, "%s %s/%s is also scaled by apps[%d]", a.Kind, a.Namespace, a.Name, j)
		}
		replicas(ps, field+".replicas", a.Replicas)
	}
}

// validateName keeps names usable as a sort-key part and in file names,
// URLs and Kubernetes event messages, without escaping.
func validateName(ps *problems, field, name string) {
	if name == "" {
		ps.add(field, "is empty")
		return
	}
	ok := len(name) <= MaxNameLength && isNameStart(name[0])
	for i := 1; ok && i < len(name); i++ {
		ok = isNameStart(name[i]) || name[i] == '.' || name[i] == '_' || name[i] == '-'
	}
	if !ok {
		ps.add(field, "%q must start with a letter or digit, hold only letters, digits, '.', '_' and '-', and be at most %d characters", name, MaxNameLength)
	}
}

func isNameStart(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

func validateSizes(ps *problems, field string, g NodeGroup) {
	if g.Desired == nil && g.Min == nil && g.Max == nil {
		ps.add(field, "sets none of desired, min and max")
		return
	}
	okDesired := nonNegative(ps, field+".desired", g.Desired)
	okMin := nonNegative(ps, field+".min", g.Min)
	okMax := nonNegative(ps, field+".max", g.Max)
	if okMin && okMax && g.Min != nil && g.Max != nil && *g.Min > *g.Max {
		ps.add(field+".min", "%d is greater than max %d", *g.Min, *g.Max)
		return
	}
	if !okDesired || g.Desired == nil {
		return
	}
	if okMin && g.Min != nil && *g.Desired < *g.Min {
		ps.add(field+".desired", "%d is below min %d", *g.Desired, *g.Min)
	}
	if okMax && g.Max != nil && *g.Desired > *g.Max {
		ps.add(field+".desired", "%d is above max %d", *g.Desired, *g.Max)
	}
}

// nonNegative reports a negative number; absent is fine.
func nonNegative(ps *problems, field string, v *int) bool {
	if v != nil && *v < 0 {
		ps.add(field, "%d is negative", *v)
		return false
	}
	return true
}

func replicas(ps *problems, field string, v *int32) {
	switch {
	case v == nil:
		ps.add(field, "is missing")
	case *v < 0:
		ps.add(field, "%d is negative", *v)
	}
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
