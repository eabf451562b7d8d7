package state

import "fmt"

// Phase is how far a drain got, recorded before the step that depends on
// it acts. Phases are ordered as the drain passes them, so a step that needs
// an earlier one done compares them (see AtLeast). In the record a phase is
// its name, as String gives it; PhaseNone is the absent field.
type Phase int

// Drain phases, in order.
const (
	PhaseNone Phase = iota
	PhasePrepared
	PhaseEvicted
	PhaseTerminating
	PhaseTerminated
)

// phaseNames are the names stored in the drain record; they never change.
var phaseNames = [...]string{
	PhaseNone:        "",
	PhasePrepared:    "prepared",
	PhaseEvicted:     "evicted",
	PhaseTerminating: "terminating",
	PhaseTerminated:  "terminated",
}

// String is the phase's stored name ("" for PhaseNone).
func (p Phase) String() string {
	if p < 0 || int(p) >= len(phaseNames) {
		return fmt.Sprintf("Phase(%d)", int(p))
	}
	return phaseNames[p]
}

// AtLeast reports whether p has reached want.
func (p Phase) AtLeast(want Phase) bool { return p >= want }

// ParsePhase reads a stored phase name; "" is PhaseNone.
func ParsePhase(name string) (Phase, error) {
	for p, n := range phaseNames {
		if n == name {
			return Phase(p), nil
		}
	}
	return PhaseNone, fmt.Errorf("unknown drain phase %q (one of prepared, evicted, terminating, terminated)", name)
}

// MarshalText stores the phase by name.
func (p Phase) MarshalText() ([]byte, error) {
	if p < 0 || int(p) >= len(phaseNames) {
		return nil, fmt.Errorf("drain phase %d has no name", int(p))
	}
	return []byte(phaseNames[p]), nil
}

// UnmarshalText reads a phase stored by name.
func (p *Phase) UnmarshalText(b []byte) error {
	v, err := ParsePhase(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}
