//go:build tools

// Package kwok pins the kwok release the local test bed runs to fake kubelets.
package kwok

import _ "sigs.k8s.io/kwok/cmd/kwok"
