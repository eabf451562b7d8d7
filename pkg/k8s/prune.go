package k8s

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A trimmed read keeps a small part of each pod (snapshot.Trimmer), yet
// decoding a whole pod costs several kilobytes of allocations that are
// garbage at once: managedFields, env, probes, mounts, container statuses.
// At 150,000 pods that garbage, and the collections it causes, are most of
// a cold read's CPU. So a page of pods served as protobuf is pruned on the
// wire first: the fields the Trimmer never reads are cut from each pod's
// bytes, and only the rest is decoded. TestPrunedPodTrimsAlike holds the
// pruning to the Trimmer: a pod decoded pruned trims to the same pod as one
// decoded whole.

// The protobuf field numbers pruned by (k8s.io/api core/v1 and
// apimachinery meta/v1 generated.proto), and the wire types used.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5

	unknownRaw             = 2  // runtime.Unknown.raw
	unknownContentEncoding = 3  // runtime.Unknown.contentEncoding
	listMetadata           = 1  // PodList.metadata
	listItems              = 2  // PodList.items
	podMetadata            = 1  // Pod.metadata
	podSpec                = 2  // Pod.spec
	podStatus              = 3  // Pod.status
	metaManagedFields      = 17 // ObjectMeta.managedFields
	specVolumes            = 1  // PodSpec.volumes
	specContainers         = 2  // PodSpec.containers
	specInitContainers     = 20 // PodSpec.initContainers
	specEphemeral          = 34 // PodSpec.ephemeralContainers
	specNodeName           = 10 // PodSpec.nodeName
	statusConditions       = 2  // PodStatus.conditions
	containerResources     = 8  // Container.resources
	resourcesRequests      = 2  // ResourceRequirements.requests
	volumeSource           = 2  // Volume.volumeSource
)

// The fields kept of a container (of its resources, the requests) and of
// a pod's status (the conditions only of a pod not bound to a node), and
// the volume sources that keep a volume: what the Trimmer reads, nothing
// more.
var (
	keptContainerFields = [...]int{1 /* name */, 6 /* ports */, containerResources, 24 /* restartPolicy */}
	keptStatusFields    = [...]int{1 /* phase */, statusConditions, 11 /* nominatedNodeName */}
	keptVolumeSources   = [...]int{1 /* hostPath */, 2 /* emptyDir */, 10 /* persistentVolumeClaim */, 29 /* ephemeral */}
)

// protoMagic starts every object the API server encodes as protobuf (a
// runtime.Unknown wrapping the object's own bytes).
var protoMagic = []byte("k8s\x00")

var errWire = errors.New("malformed protobuf")

// wireField is one field of a message on the wire.
type wireField struct {
	num  int
	typ  int
	all  []byte // the field as encoded, tag included
	data []byte // a length-delimited field's content
}

// nextField splits the first field off b.
func nextField(b []byte) (wireField, []byte, error) {
	tag, n := binary.Uvarint(b)
	if n <= 0 || tag>>3 == 0 || tag>>3 > 1<<29 {
		return wireField{}, nil, errWire
	}
	f := wireField{num: int(tag >> 3), typ: int(tag & 7)}
	size := n
	switch f.typ {
	case wireVarint:
		_, m := binary.Uvarint(b[n:])
		if m <= 0 {
			return wireField{}, nil, errWire
		}
		size += m
	case wireFixed64:
		size += 8
	case wireFixed32:
		size += 4
	case wireBytes:
		l, m := binary.Uvarint(b[n:])
		if m <= 0 || l > uint64(len(b)-n-m) {
			return wireField{}, nil, errWire
		}
		f.data = b[n+m : n+m+int(l)]
		size += m + int(l)
	default: // groups: the API's messages have none
		return wireField{}, nil, errWire
	}
	if size > len(b) {
		return wireField{}, nil, errWire
	}
	f.all = b[:size]
	return f, b[size:], nil
}

// appendBytesField appends a length-delimited field.
func appendBytesField(dst []byte, num int, data []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(num)<<3|wireBytes)
	dst = binary.AppendUvarint(dst, uint64(len(data)))
	return append(dst, data...)
}

// filterFields appends to dst the fields of msg that keep accepts.
func filterFields(dst, msg []byte, keep func(f wireField) bool) ([]byte, error) {
	for len(msg) > 0 {
		f, rest, err := nextField(msg)
		if err != nil {
			return dst, err
		}
		if keep(f) {
			dst = append(dst, f.all...)
		}
		msg = rest
	}
	return dst, nil
}

func oneOf(num int, nums []int) bool {
	for _, n := range nums {
		if n == num {
			return true
		}
	}
	return false
}

// podPruner prunes pods on the wire. Its buffers are reused from pod to
// pod; a pruned pod is valid until the next.
type podPruner struct {
	pod, meta, spec, status, container, resources []byte
}

// prune returns the pod encoded in src without the fields the Trimmer
// never reads.
func (p *podPruner) prune(src []byte) ([]byte, error) {
	bound, err := podBound(src)
	if err != nil {
		return nil, err
	}
	keepStatus := func(f wireField) bool {
		return oneOf(f.num, keptStatusFields[:]) && (f.num != statusConditions || !bound)
	}
	out := p.pod[:0]
	defer func() { p.pod = out[:0] }()
	for len(src) > 0 {
		f, rest, err := nextField(src)
		if err != nil {
			return nil, err
		}
		src = rest
		if f.typ != wireBytes {
			out = append(out, f.all...)
			continue
		}
		switch f.num {
		case podMetadata:
			p.meta, err = filterFields(p.meta[:0], f.data, func(f wireField) bool { return f.num != metaManagedFields })
			out = appendBytesField(out, f.num, p.meta)
		case podSpec:
			err = p.pruneSpec(f.data)
			out = appendBytesField(out, f.num, p.spec)
		case podStatus:
			p.status, err = filterFields(p.status[:0], f.data, keepStatus)
			out = appendBytesField(out, f.num, p.status)
		default:
			out = append(out, f.all...)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pruneSpec writes the pruned PodSpec in src to p.spec: containers keep
// what packing reads, ephemeral containers (never packed) go, and so do the
// volumes of sources the planner does not read.
func (p *podPruner) pruneSpec(src []byte) error {
	out := p.spec[:0]
	defer func() { p.spec = out }()
	for len(src) > 0 {
		f, rest, err := nextField(src)
		if err != nil {
			return err
		}
		src = rest
		switch {
		case f.typ != wireBytes:
			out = append(out, f.all...)
		case f.num == specContainers || f.num == specInitContainers:
			if err := p.pruneContainer(f.data); err != nil {
				return err
			}
			out = appendBytesField(out, f.num, p.container)
		case f.num == specEphemeral:
		case f.num == specVolumes:
			keep, err := keptVolume(f.data)
			if err != nil {
				return err
			}
			if keep {
				out = append(out, f.all...)
			}
		default:
			out = append(out, f.all...)
		}
	}
	return nil
}

// pruneContainer writes the pruned Container in src to p.container.
func (p *podPruner) pruneContainer(src []byte) error {
	out := p.container[:0]
	defer func() { p.container = out }()
	for len(src) > 0 {
		f, rest, err := nextField(src)
		if err != nil {
			return err
		}
		src = rest
		switch {
		case !oneOf(f.num, keptContainerFields[:]):
		case f.num == containerResources && f.typ == wireBytes:
			p.resources, err = filterFields(p.resources[:0], f.data, func(f wireField) bool { return f.num == resourcesRequests })
			if err != nil {
				return err
			}
			out = appendBytesField(out, f.num, p.resources)
		default:
			out = append(out, f.all...)
		}
	}
	return nil
}

// podBound reports whether the Pod in msg names its node.
func podBound(msg []byte) (bool, error) {
	return anyInner(msg, podSpec, func(s wireField) bool {
		return s.num == specNodeName && s.typ == wireBytes && len(s.data) > 0
	})
}

// keptVolume reports whether the Volume in msg has a source the Trimmer
// keeps.
func keptVolume(msg []byte) (bool, error) {
	return anyInner(msg, volumeSource, func(s wireField) bool { return oneOf(s.num, keptVolumeSources[:]) })
}

// anyInner reports whether a field of an embedded message numbered outer
// in msg satisfies is.
func anyInner(msg []byte, outer int, is func(wireField) bool) (bool, error) {
	for len(msg) > 0 {
		f, rest, err := nextField(msg)
		if err != nil {
			return false, err
		}
		msg = rest
		if f.num != outer || f.typ != wireBytes {
			continue
		}
		for inner := f.data; len(inner) > 0; {
			s, rest, err := nextField(inner)
			if err != nil {
				return false, err
			}
			if is(s) {
				return true, nil
			}
			inner = rest
		}
	}
	return false, nil
}

// decodePrunedPods decodes a protobuf PodList body as the API server sends
// it, each pod pruned (see podPruner), into pods[:0] (its backing array
// reused: each pod is written whole, so whatever an earlier page's pods
// point to is left as it was).
func decodePrunedPods(body []byte, p *podPruner, pods []corev1.Pod) ([]corev1.Pod, metav1.ListMeta, error) {
	var meta metav1.ListMeta
	list, err := unwrapProtobuf(body)
	if err != nil {
		return nil, meta, err
	}
	count := 0
	if _, err := filterFields(nil, list, func(f wireField) bool {
		if f.num == listItems {
			count++
		}
		return false
	}); err != nil {
		return nil, meta, fmt.Errorf("pod list: %w", err)
	}
	pods = slices.Grow(pods[:0], count)
	for len(list) > 0 {
		f, rest, err := nextField(list)
		if err != nil {
			return nil, meta, fmt.Errorf("pod list: %w", err)
		}
		list = rest
		switch {
		case f.typ != wireBytes:
		case f.num == listMetadata:
			if err := meta.Unmarshal(f.data); err != nil {
				return nil, meta, fmt.Errorf("pod list metadata: %w", err)
			}
		case f.num == listItems:
			b, err := p.prune(f.data)
			if err != nil {
				return nil, meta, fmt.Errorf("pod %d of the list: %w", len(pods), err)
			}
			pods = append(pods, corev1.Pod{})
			if err := pods[len(pods)-1].Unmarshal(b); err != nil {
				return nil, meta, fmt.Errorf("pod %d of the list: %w", len(pods)-1, err)
			}
		}
	}
	return pods, meta, nil
}

// unwrapProtobuf returns the object bytes of the API server's protobuf
// envelope (the magic number, then a runtime.Unknown).
func unwrapProtobuf(body []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(body, protoMagic)
	if !ok {
		return nil, errors.New("protobuf body without the Kubernetes magic number")
	}
	var raw []byte
	encoded := false
	if _, err := filterFields(nil, rest, func(f wireField) bool {
		switch {
		case f.num == unknownRaw && f.typ == wireBytes:
			raw = f.data
		case f.num == unknownContentEncoding && len(f.data) > 0:
			encoded = true
		}
		return false
	}); err != nil {
		return nil, fmt.Errorf("protobuf envelope: %w", err)
	}
	if encoded {
		return nil, errors.New("protobuf envelope: content encoding not supported")
	}
	return raw, nil
}
