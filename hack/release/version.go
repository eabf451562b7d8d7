package main

import (
	"fmt"
	"regexp"
	"strings"
)

// semver is a semantic version (semver.org 2.0.0) without build metadata:
// numbers without leading zeros, and an optional pre-release of
// dot-separated identifiers (numeric ones without leading zeros).
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)` +
	`(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?$`)

// CheckVersion accepts x.y.z or x.y.z-pre and says what is wrong with
// anything else.
func CheckVersion(v string) error {
	switch {
	case v == "":
		return fmt.Errorf("VERSION is required: make release VERSION=x.y.z (for example 0.1.0, or 0.2.0-rc.1 for a pre-release)")
	case strings.HasPrefix(v, "v") && semver.MatchString(v[1:]):
		return fmt.Errorf("VERSION %q: drop the leading v (the release's tag is %s, its version %s)", v, v, v[1:])
	case strings.Contains(v, "+"):
		return fmt.Errorf("VERSION %q: build metadata (+...) is not used; the commit is stamped on its own", v)
	case !semver.MatchString(v):
		return fmt.Errorf("VERSION %q is not a semantic version x.y.z or x.y.z-pre (numbers without leading zeros; a pre-release of dot-separated letters, digits and hyphens, e.g. 1.2.0-rc.1)", v)
	}
	return nil
}
