package schedule

import (
	"errors"
	"fmt"
	"time"

	// The IANA zone database, built into every binary that schedules:
	// Lambda's provided.al2023 runtime has no /usr/share/zoneinfo, and a
	// schedule must not fire at a different hour because of where it runs.
	// time.LoadLocation still prefers the system's copy when there is one.
	_ "time/tzdata"
)

// LoadLocation returns the IANA time zone name ("Europe/Amsterdam"); the
// empty name is UTC. "Local" is refused: it would make a schedule fire at
// hours that depend on the machine running it.
func LoadLocation(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`"Local" depends on the machine; name an IANA zone such as "Europe/Amsterdam"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: %w", name, err)
	}
	return loc, nil
}
