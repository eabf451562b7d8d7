package snapshot

import (
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// compactCounts is the compact form's counts object.
type compactCounts struct {
	Nodes                int `json:"nodes"`
	PodShapes            int `json:"podShapes"`
	Pods                 int `json:"pods"`
	PodDisruptionBudgets int `json:"podDisruptionBudgets"`
}

// compactShape is one podShapes entry as written.
type compactShape struct {
	Labels          map[string]string       `json:"labels,omitempty"`
	Annotations     map[string]string       `json:"annotations,omitempty"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
	Spec            *corev1.PodSpec         `json:"spec"`
}

// compactPodOut is one pods entry as written.
type compactPodOut struct {
	Name              string           `json:"name"`
	Namespace         string           `json:"namespace,omitempty"`
	UID               types.UID        `json:"uid,omitempty"`
	Shape             int              `json:"shape"`
	NodeName          string           `json:"nodeName,omitempty"`
	Phase             corev1.PodPhase  `json:"phase,omitempty"`
	NominatedNodeName string           `json:"nominatedNodeName,omitempty"`
	CreationTimestamp *metav1.Time     `json:"creationTimestamp,omitempty"`
	DeletionTimestamp *metav1.Time     `json:"deletionTimestamp,omitempty"`
	Scheduled         *compactSchedule `json:"scheduled,omitempty"`
	PinnedNode        string           `json:"pinnedNode,omitempty"`
}

type compactSchedule struct {
	Status             corev1.ConditionStatus `json:"status"`
	Reason             string                 `json:"reason,omitempty"`
	LastTransitionTime *metav1.Time           `json:"lastTransitionTime,omitempty"`
}

// WriteCompactSnapshot writes s in the compact form (FormatCompact), after
// the checks WriteSnapshot makes. It trims what s holds (s itself is not
// changed) and streams: one object is encoded at a time.
//
// The compact form holds only what the planner reads. Pods
// of one controller share their labels, kept annotations, owner references
// and trimmed spec: the form writes each such "shape" once, under
// podShapes, and per pod only what is its own plus the index of its shape:
//
//	{
//	  "format": "nodetide.io/snapshot-compact/v1",
//	  "capturedAt": "2026-11-30T10:00:00Z",
//	  "counts": {"nodes": 1, "podShapes": 1, "pods": 2, "podDisruptionBudgets": 0},
//	  "nodeGroups": [
//	    {"name": "workers", "provider": "aws", "minSize": 1, "maxSize": 10, "targetSize": 1, "template": {…}, "instances": ["aws:///eu-west-1a/i-0abc"]}
//	  ],
//	  "state": {"unneededSince": {}, "lastScaleUp": {}},
//	  "nodes": [
//	    {"metadata": {"name": "node-a", …}, "spec": {"providerID": "aws:///eu-west-1a/i-0abc"}, "status": {"allocatable": {…}, …}}
//	  ],
//	  "podDisruptionBudgets": [],
//	  "podShapes": [
//	    {"labels": {"app": "web"}, "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9", "uid": "…", "controller": true}],
//	     "spec": {"containers": [{"name": "web", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}]}}
//	  ],
//	  "pods": [
//	    {"name": "web-5d9-abcde", "namespace": "shop", "uid": "…", "shape": 0, "nodeName": "node-a", "phase": "Running", "creationTimestamp": "2026-11-30T09:00:00Z"},
//	    {"name": "web-5d9-fghij", "namespace": "shop", "uid": "…", "shape": 0, "phase": "Pending", "creationTimestamp": "2026-11-30T09:59:00Z",
//	     "scheduled": {"status": "False", "reason": "Unschedulable", "lastTransitionTime": "2026-11-30T09:59:01Z"}}
//	  ]
//	}
//
// A DaemonSet pod's pin to its node (required node affinity whose terms
// all match metadata.name In [node]) is written per pod as pinnedNode, its
// shape holding the affinity with the name left empty, so a DaemonSet's
// pods share one shape. format must be the first key. Nodes and PDBs are Kubernetes objects
// trimmed as the Trimmer trims them; a shape's ownerReferences and spec are
// Kubernetes fields too (unknown fields in them are tolerated, as newer
// clusters add some). Every other key is nodetide's and must be known.
// podShapes must come before pods, and pods must be the last key (its
// entries are parsed straight from the stream); counts, when given, must
// match the lists (they let the reader size them up front).
func WriteCompactSnapshot(w io.Writer, s Snapshot) error {
	if err := validateSnapshot(&s, fullPodPaths); err != nil {
		return err
	}
	tr := NewTrimmer()
	shapeAt := map[*podShape]int{}
	var shapes []*podShape
	podShape := make([]int32, len(s.Pods))
	for i := range s.Pods {
		p := &s.Pods[i]
		if node := pinnedNode(p.Spec.Affinity); node != "" {
			unpinned := *p
			unpinned.Spec.Affinity = pinAffinity(p.Spec.Affinity, "")
			p = &unpinned
		}
		_, sh := tr.pod(p)
		at, ok := shapeAt[sh]
		if !ok {
			at = len(shapes)
			shapeAt[sh] = at
			shapes = append(shapes, sh)
		}
		podShape[i] = int32(at)
	}

	sw := newSnapWriter(w, "")
	sw.raw("{\n")
	sw.field("format", FormatCompact)
	sw.field("capturedAt", s.CapturedAt.UTC())
	sw.field("counts", compactCounts{Nodes: len(s.Nodes), PodShapes: len(shapes), Pods: len(s.Pods), PodDisruptionBudgets: len(s.PodDisruptionBudgets)})
	groups := normalGroups(s.NodeGroups)
	sw.list("nodeGroups", len(groups), func(i int) { sw.encode(&groups[i], 2, false) })
	sw.field("state", s.State.Normal())
	sw.list("nodes", len(s.Nodes), func(i int) {
		n := tr.Node(&s.Nodes[i])
		sw.encode(&n, 2, false)
	})
	sw.list("podDisruptionBudgets", len(s.PodDisruptionBudgets), func(i int) {
		b := tr.PDB(&s.PodDisruptionBudgets[i])
		sw.encode(&b, 2, false)
	})
	// The volume objects are written only when there are any: a document
	// without them is one an older build reads too.
	if len(s.PersistentVolumeClaims) > 0 {
		sw.list("persistentVolumeClaims", len(s.PersistentVolumeClaims), func(i int) {
			v := tr.PersistentVolumeClaim(&s.PersistentVolumeClaims[i])
			sw.encode(&v, 2, false)
		})
	}
	if len(s.PersistentVolumes) > 0 {
		sw.list("persistentVolumes", len(s.PersistentVolumes), func(i int) {
			v := tr.PersistentVolume(&s.PersistentVolumes[i])
			sw.encode(&v, 2, false)
		})
	}
	if len(s.StorageClasses) > 0 {
		sw.list("storageClasses", len(s.StorageClasses), func(i int) {
			v := tr.StorageClass(&s.StorageClasses[i])
			sw.encode(&v, 2, false)
		})
	}
	sw.list("podShapes", len(shapes), func(i int) {
		sh := shapes[i]
		sw.encode(&compactShape{Labels: sh.labels, Annotations: sh.annotations, OwnerReferences: sh.owners, Spec: &sh.spec}, 2, false)
	})
	sw.list("pods", len(s.Pods), func(i int) {
		p := &s.Pods[i]
		out := compactPodOut{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, Shape: int(podShape[i]),
			NodeName: p.Spec.NodeName, Phase: p.Status.Phase, NominatedNodeName: p.Status.NominatedNodeName,
			DeletionTimestamp: p.DeletionTimestamp, PinnedNode: pinnedNode(p.Spec.Affinity),
		}
		if !p.CreationTimestamp.IsZero() {
			out.CreationTimestamp = &p.CreationTimestamp
		}
		if c := scheduledCondition(p); c != nil {
			out.Scheduled = &compactSchedule{Status: c.Status, Reason: c.Reason}
			if !c.LastTransitionTime.IsZero() {
				out.Scheduled.LastTransitionTime = &c.LastTransitionTime
			}
		}
		sw.encode(&out, 2, false)
	})
	sw.raw("\n}\n")
	return sw.flush()
}

// compactReader reads the compact form's own parts: counts, podShapes and
// pods.
type compactReader struct {
	d         *docDecoder
	counts    compactCounts
	hasCounts bool
	shapes    []*podShape
}

// hint is a capacity for a list the counts say has n elements, each at
// least minBytes long in the document: no more than the input can hold, so
// a small document cannot make the reader allocate much.
func (c *compactReader) hint(n, minBytes int) int {
	limit := int64(maxPreallocUnknown)
	if size := c.d.src.size; size >= 0 {
		limit = size / int64(minBytes)
	}
	return int(min(int64(max(n, 0)), limit, maxPrealloc))
}

func (c *compactReader) readCounts(path string) error {
	c.hasCounts = true
	return c.d.object(path, []string{"nodes", "podShapes", "pods", "podDisruptionBudgets"}, func(key, path string) error {
		var n *int
		switch key {
		case "nodes":
			n = &c.counts.Nodes
		case "podShapes":
			n = &c.counts.PodShapes
		case "pods":
			n = &c.counts.Pods
		case "podDisruptionBudgets":
			n = &c.counts.PodDisruptionBudgets
		}
		if err := c.d.value(path, n); err != nil {
			return err
		}
		if *n < 0 {
			return &DocumentError{Path: path, Err: fmt.Errorf("must not be negative (got %d)", *n)}
		}
		return nil
	})
}

// checkCounts reports a count that does not match its list.
func (c *compactReader) checkCounts(s *Snapshot) error {
	if !c.hasCounts {
		return nil
	}
	for _, f := range []struct {
		name      string
		said, got int
	}{
		{"nodes", c.counts.Nodes, len(s.Nodes)},
		{"podShapes", c.counts.PodShapes, len(c.shapes)},
		{"pods", c.counts.Pods, len(s.Pods)},
		{"podDisruptionBudgets", c.counts.PodDisruptionBudgets, len(s.PodDisruptionBudgets)},
	} {
		if f.said != f.got {
			return &DocumentError{Path: "counts." + f.name, Err: fmt.Errorf("says %d, but the document has %d", f.said, f.got)}
		}
	}
	return nil
}

func (c *compactReader) readShapes(path string) error {
	if c.shapes == nil {
		c.shapes = make([]*podShape, 0, c.hint(c.counts.PodShapes, len(`{},`)))
	}
	tr := c.d.tr
	return c.d.array(path, func(i int, path string) error {
		var (
			labels, annotations map[string]string
			owners              []metav1.OwnerReference
			spec                corev1.PodSpec
		)
		err := c.d.object(path, []string{"labels", "annotations", "ownerReferences", "spec"}, func(key, path string) error {
			switch key {
			case "labels":
				return c.d.value(path, &labels)
			case "annotations":
				return c.d.value(path, &annotations)
			case "ownerReferences":
				return c.d.value(path, &owners)
			case "spec":
				return c.d.value(path, &spec)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := checkPodResources(path+".spec", &spec); err != nil {
			return err
		}
		if spec.NodeName != "" {
			return &DocumentError{Path: path + ".spec.nodeName", Err: errors.New("belongs to each pod (pods[].nodeName), not to a shape")}
		}
		c.shapes = append(c.shapes, &podShape{
			labels:      tr.strMap(labels, nil),
			annotations: tr.strMap(annotations, keptAnnotation),
			owners:      tr.owners(owners),
			spec:        tr.internSpec(trimPodSpec(&spec)),
		})
		return nil
	})
}
