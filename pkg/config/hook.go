package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// LifecycleHookPrefix starts the name of every termination lifecycle hook
// nodetide drains for; the cluster's name follows it.
const LifecycleHookPrefix = "nodetide-drain-"

// maxHookName is AWS's limit on a lifecycle hook's name.
const maxHookName = 255

// LifecycleHookName is the termination lifecycle hook of the cluster's
// deployment: nodetide-drain-<cluster>. Each deployment drains for its own
// hook alone, so two clusters sharing an account and region never take each
// other's lifecycle actions. A cluster name AWS does not allow in a hook
// name (A-Z a-z 0-9 - _ /, at most 255 characters) has those characters
// replaced by "-" and, so that two such names cannot meet, a short hash of
// the exact name appended.
func LifecycleHookName(cluster string) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '/' {
			return r
		}
		return '-'
	}, cluster)
	name := LifecycleHookPrefix + clean
	if clean == cluster && len(name) <= maxHookName {
		return name
	}
	sum := sha256.Sum256([]byte(cluster))
	tail := "-" + hex.EncodeToString(sum[:4])
	if len(name) > maxHookName-len(tail) {
		name = name[:maxHookName-len(tail)]
	}
	return name + tail
}

// LifecycleHookName is this config's hook (see the function of that name).
func (c *Config) LifecycleHookName() string { return LifecycleHookName(c.Cluster.Name) }
