package testbed

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// kwok manages (fakes the kubelet of) the nodes carrying this annotation.
	kwokNodeAnnotation      = "kwok.x-k8s.io/node"
	kwokNodeAnnotationValue = "fake"

	// GPUResource is the extended resource Node.GPU sets.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"

	defaultPods      = "110"
	nodeReadyTimeout = 30 * time.Second
)

// Node describes a kwok-managed node for AddNode and NodeObject.
type Node struct {
	// Name is required.
	Name string
	// CPU and Memory are the node's capacity, which is also its allocatable,
	// e.g. "4" and "16Gi". Left empty, the resource is not set at all.
	CPU, Memory string
	// Pods is the pod capacity; "110" when empty.
	Pods string
	// GPU is the nvidia.com/gpu capacity, when not empty.
	GPU string
	// Labels and Annotations are added to what every node carries
	// (kubernetes.io/hostname, os and arch; the kwok annotation) and win over
	// those defaults.
	Labels, Annotations map[string]string
	Taints              []corev1.Taint
	// ProviderID is "kwok://<name>" when empty.
	ProviderID string
}

// NodeObject is the Node AddNode creates, without creating it, so a provider
// can create the same kind of node. It panics on a malformed quantity, which
// AddNode reports as a test failure instead.
func NodeObject(n Node) *corev1.Node {
	node, err := nodeObject(n)
	if err != nil {
		panic(err)
	}
	return node
}

func nodeObject(n Node) (*corev1.Node, error) {
	if n.Name == "" {
		return nil, fmt.Errorf("testbed: node without a name")
	}
	resources := corev1.ResourceList{}
	pods := n.Pods
	if pods == "" {
		pods = defaultPods
	}
	for _, r := range []struct {
		name  corev1.ResourceName
		value string
	}{
		{corev1.ResourceCPU, n.CPU},
		{corev1.ResourceMemory, n.Memory},
		{corev1.ResourcePods, pods},
		{GPUResource, n.GPU},
	} {
		if r.value == "" {
			continue
		}
		q, err := resource.ParseQuantity(r.value)
		if err != nil {
			return nil, fmt.Errorf("testbed: node %s: %s %q: %w", n.Name, r.name, r.value, err)
		}
		resources[r.name] = q
	}

	labels := map[string]string{
		corev1.LabelHostname:   n.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	maps.Copy(labels, n.Labels)
	annotations := map[string]string{
		kwokNodeAnnotation: kwokNodeAnnotationValue,
		// As a kubelet would: no TTL for caching this node's objects.
		"node.alpha.kubernetes.io/ttl": "0",
	}
	maps.Copy(annotations, n.Annotations)
	providerID := n.ProviderID
	if providerID == "" {
		providerID = "kwok://" + n.Name
	}
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.Name,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{
			ProviderID: providerID,
			Taints:     append([]corev1.Taint(nil), n.Taints...),
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
		},
	}, nil
}

// AddNode creates a kwok-managed node and waits until it is Ready and
// schedulable. The node is deleted when the test ends.
func (c *ControlPlane) AddNode(t testing.TB, n Node) *corev1.Node {
	t.Helper()
	want, err := nodeObject(n)
	if err != nil {
		t.Fatal(err)
	}
	nodes := c.Client.CoreV1().Nodes()
	if _, err := nodes.Create(t.Context(), want, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testbed: create node %s: %v", n.Name, err)
	}
	t.Cleanup(func() {
		// The test's context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := nodes.Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testbed: delete node %s: %v", n.Name, err)
		}
	})
	var node *corev1.Node
	c.waitFor(t, nodeReadyTimeout, "node "+n.Name+" Ready", c.kwok(), func(ctx context.Context) (bool, error) {
		var err error
		node, err = nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeReady(node), nil
	})
	return node
}

// nodeReady reports whether the node is Ready and rid of the not-ready taint
// the apiserver puts on every new node: until the controller-manager has
// removed it, the scheduler places nothing there.
func nodeReady(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
