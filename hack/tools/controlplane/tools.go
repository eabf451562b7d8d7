//go:build tools

// Package controlplane pins the Kubernetes control-plane binaries the local
// test bed runs: etcd, kube-apiserver, kube-controller-manager, kube-scheduler.
package controlplane

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
