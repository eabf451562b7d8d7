package planner

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodetide/nodetide/pkg/podfacts"
	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const zoneKey = corev1.LabelTopologyZone

// claimVolume mounts claim "name" as volume "data".
func claimVolume(claim string) podOpt {
	return volume(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
}

// boundClaim is claim default/name bound to PV pv.
func boundClaim(name, pv string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
}

// unboundClaim is claim default/name of class (nil: none).
func unboundClaim(name string, class *string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: class},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}

func ptr[T any](v T) *T { return &v }

// pvAffinity is a PV whose required node affinity is one term.
func pvAffinity(name string, reqs ...corev1.NodeSelectorRequirement) corev1.PersistentVolume {
	return corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}}},
	}
}

// pvLabelled is a PV carrying labels (VolumeZone's legacy zone labels).
func pvLabelled(name string, kv ...string) corev1.PersistentVolume {
	pv := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i+1 < len(kv); i += 2 {
		pv.Labels[kv[i]] = kv[i+1]
	}
	return pv
}

func storageClass(name string, mode storagev1.VolumeBindingMode, zones ...string) storagev1.StorageClass {
	sc := storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &mode}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: zoneKey, Values: zones}}}}
	}
	return sc
}

func withVolumes(s snapshot.Snapshot, claims []corev1.PersistentVolumeClaim, pvs []corev1.PersistentVolume, classes ...storagev1.StorageClass) snapshot.Snapshot {
	s.PersistentVolumeClaims, s.PersistentVolumes, s.StorageClasses = claims, pvs, classes
	return s
}

// volZonal is a group whose template is in zone z.
func volZonal(name, z string) snapshot.NodeGroup {
	return withTemplateLabels(group(name, 0, 5, 0, "4", "16Gi"), zoneKey, z)
}

func inZone(z string) nodeOpt { return func(n *corev1.Node) { n.Labels[zoneKey] = z } }

func TestVolumeTopologyScaleUp(t *testing.T) {
	ab := []snapshot.NodeGroup{volZonal("a", "eu-1a"), volZonal("b", "eu-1b")}
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	immediate := storagev1.VolumeBindingImmediate
	pendingWith := func(name, claim string) corev1.Pod {
		return pod(name, "1", "1Gi", pending(), claimVolume(claim))
	}
	groupCode := func(code string) func(*testing.T, Plan) {
		return func(t *testing.T, p Plan) {
			for _, u := range p.Unschedulable {
				for _, g := range u.NodeGroups {
					if g.Code != code {
						t.Errorf("%s: group %s code %s, want %s (%s)", u.Pod, g.NodeGroup, g.Code, code, g.Reason)
					}
				}
			}
		}
	}
	runCases(t, []planCase{
		{
			name: "a PV's node affinity picks the group",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")},
				[]corev1.PersistentVolume{pvAffinity("pv-0", req(zoneKey, corev1.NodeSelectorOpIn, "eu-1b"))}),
			want: want{up: []string{"b +1 =1 [default/p]"}},
		},
		{
			name: "each pod of a StatefulSet follows its own volume",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p-0", "data-0"), pendingWith("p-1", "data-1")}),
				[]corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0"), boundClaim("data-1", "pv-1")},
				[]corev1.PersistentVolume{
					pvAffinity("pv-0", req(zoneKey, corev1.NodeSelectorOpIn, "eu-1b")),
					pvAffinity("pv-1", req(zoneKey, corev1.NodeSelectorOpIn, "eu-1a")),
				}),
			want: want{up: []string{"a +1 =1 [default/p-1]", "b +1 =1 [default/p-0]"}},
		},
		{
			name: "no group in the PV's zone: the reason names volume, claim, PV and zones",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")},
				[]corev1.PersistentVolume{pvLabelled("pv-0", zoneKey, "eu-1c")}),
			want: want{
				unsched: []string{`default/p: fits no node group: ` +
					`a: volume "data" (claim default/data-0) is bound to a PV in zone eu-1c (pv-0); the group is in zone eu-1a; ` +
					`b: volume "data" (claim default/data-0) is bound to a PV in zone eu-1c (pv-0); the group is in zone eu-1b`},
				check: groupCode(ReasonVolume),
			},
		},
		{
			name: "legacy zone labels: multi-zone values, beta label on the PV matches the GA label on the node",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")},
				[]corev1.PersistentVolume{pvLabelled("pv-0", corev1.LabelFailureDomainBetaZone, "eu-1c__eu-1b")}),
			want: want{up: []string{"b +1 =1 [default/p]"}},
		},
		{
			name: "a template with no zone label takes a zoned PV, as on a cluster without zones",
			snap: withVolumes(clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")},
				[]corev1.PersistentVolume{pvLabelled("pv-0", zoneKey, "eu-1c")}),
			want: want{up: []string{"workers +1 =1 [default/p]"}},
		},
		{
			name: "a local PV pinned to a host takes no new node",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")},
				[]corev1.PersistentVolume{pvAffinity("pv-0", req(corev1.LabelHostname, corev1.NodeSelectorOpIn, "gone-node"))}),
			want: want{unsched: []string{`default/p: fits no node group: ` +
				`a: volume "data" (claim default/data-0) is bound to PV pv-0, which needs a node where kubernetes.io/hostname in (gone-node); ` +
				`b: volume "data" (claim default/data-0) is bound to PV pv-0, which needs a node where kubernetes.io/hostname in (gone-node)`}},
		},
		{
			name: "an existing node in another zone does not take the pod; a new one in the PV's zone does",
			snap: withVolumes(clusterOf(
				[]snapshot.NodeGroup{volZonal("a", "eu-1a"), withTemplateLabels(group("b", 0, 5, 1, "4", "16Gi", "n1"), zoneKey, "eu-1b")},
				[]corev1.Node{node("n1", "b", "4", "16Gi", inZone("eu-1b"))},
				[]corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")},
				[]corev1.PersistentVolume{pvAffinity("pv-0", req(zoneKey, corev1.NodeSelectorOpIn, "eu-1a"))}),
			want: want{up: []string{"a +1 =1 [default/p]"}},
		},
		{
			name: "an existing node in the PV's zone takes the pod",
			snap: withVolumes(clusterOf(
				[]snapshot.NodeGroup{volZonal("a", "eu-1a"), withTemplateLabels(group("b", 0, 5, 1, "4", "16Gi", "n1"), zoneKey, "eu-1b")},
				[]corev1.Node{node("n1", "b", "4", "16Gi", inZone("eu-1b"))},
				[]corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")},
				[]corev1.PersistentVolume{pvAffinity("pv-0", req(zoneKey, corev1.NodeSelectorOpIn, "eu-1b"))}),
			want: want{},
		},
		{
			name: "an unbound WaitForFirstConsumer claim goes where its class provisions",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{unboundClaim("data-0", ptr("zonal"))}, nil,
				storageClass("zonal", wffc, "eu-1b", "eu-1c")),
			want: want{up: []string{"b +1 =1 [default/p]"}},
		},
		{
			name: "a class that provisions in no group's zone: the reason names the class and its topology",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{unboundClaim("data-0", ptr("zonal"))}, nil,
				storageClass("zonal", wffc, "eu-1c")),
			want: want{
				unsched: []string{`default/p: fits no node group: ` +
					`a: volume "data" (claim default/data-0) is not bound yet and its StorageClass "zonal" provisions only where topology.kubernetes.io/zone in (eu-1c); ` +
					`b: volume "data" (claim default/data-0) is not bound yet and its StorageClass "zonal" provisions only where topology.kubernetes.io/zone in (eu-1c)`},
				check: groupCode(ReasonVolume),
			},
		},
		{
			name: "a WaitForFirstConsumer class without allowed topologies fits anywhere",
			snap: withVolumes(clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{unboundClaim("data-0", ptr("any"))}, nil,
				storageClass("any", wffc)),
			want: want{up: []string{"workers +1 =1 [default/p]"}},
		},
		{
			name: "the beta class annotation wins over spec.storageClassName",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{func() corev1.PersistentVolumeClaim {
					c := unboundClaim("data-0", ptr("nowhere"))
					c.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "zonal"}
					return c
				}()}, nil,
				storageClass("zonal", wffc, "eu-1a"), storageClass("nowhere", wffc, "mars")),
			want: want{up: []string{"a +1 =1 [default/p]"}},
		},
		{
			name: "an unbound claim of an immediate class is not promised a node",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{unboundClaim("data-0", ptr("fast"))}, nil,
				storageClass("fast", immediate)),
			want: want{
				unsched: []string{`default/p: volume "data" (claim default/data-0) is not bound and its StorageClass "fast" binds immediately: the scheduler places the pod only once the claim is bound`},
				check:   groupCode(ReasonVolume),
			},
		},
		{
			name: "an unbound claim without a class is not promised a node",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{unboundClaim("data-0", nil)}, nil),
			want: want{unsched: []string{`default/p: volume "data" (claim default/data-0) is not bound and has no StorageClass: the scheduler places the pod only once the claim is bound`}},
		},
		{
			name: "an unbound claim whose class is missing is not schedulable",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{unboundClaim("data-0", ptr("gone"))}, nil,
				storageClass("other", wffc)),
			want: want{unsched: []string{`default/p: volume "data" (claim default/data-0) is not bound and its StorageClass "gone" does not exist: the claim cannot be provisioned`}},
		},
		{
			name: "a missing claim fits nowhere, also on an existing node with room",
			snap: withVolumes(clusterOf(ab, []corev1.Node{node("n9", "none", "4", "16Gi")}, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{boundClaim("other", "pv-0")}, nil),
			want: want{unsched: []string{`default/p: volume "data" (claim default/data-0): the claim does not exist`}},
		},
		{
			name: "a claim bound to a missing PV fits nowhere",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")}, nil),
			want: want{unsched: []string{`default/p: volume "data" (claim default/data-0) is bound to PV pv-0, which does not exist`}},
		},
		{
			name: "a claim being deleted fits nowhere",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
				[]corev1.PersistentVolumeClaim{func() corev1.PersistentVolumeClaim {
					c := boundClaim("data-0", "pv-0")
					c.DeletionTimestamp = &metav1.Time{Time: t0.Add(-time.Minute)}
					return c
				}()},
				[]corev1.PersistentVolume{pvLabelled("pv-0")}),
			want: want{unsched: []string{`default/p: volume "data" (claim default/data-0): the claim is being deleted`}},
		},
		{
			name: "a generic ephemeral volume's claim not created yet follows its template's class",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pod("p", "1", "1Gi", pending(), volume(corev1.Volume{Name: "scratch",
				VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
					Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr("zonal")}}}}}))}),
				nil, nil, storageClass("zonal", wffc, "eu-1b")),
			want: want{up: []string{"b +1 =1 [default/p]"}},
		},
		{
			name: "a generic ephemeral volume's claim, once created and bound, follows its PV",
			snap: withVolumes(clusterOf(ab, nil, []corev1.Pod{pod("p", "1", "1Gi", pending(), volume(corev1.Volume{Name: "scratch",
				VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
					Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr("zonal")}}}}}))}),
				[]corev1.PersistentVolumeClaim{boundClaim("p-scratch", "pv-0")},
				[]corev1.PersistentVolume{pvAffinity("pv-0", req(zoneKey, corev1.NodeSelectorOpIn, "eu-1a"))},
				storageClass("zonal", wffc, "eu-1b")),
			want: want{up: []string{"a +1 =1 [default/p]"}},
		},
		{
			name: "a snapshot without volume objects plans as before",
			snap: clusterOf(ab, nil, []corev1.Pod{pendingWith("p", "data-0")}),
			want: want{up: []string{"a +1 =1 [default/p]"}},
		},
	})
}

func TestVolumeTopologyScaleDown(t *testing.T) {
	// n1 (lightly used) and n2 in zone eu-1a, n3 in eu-1b; n2 and n3 have
	// a cpu to spare.
	base := func(p corev1.Pod, claims []corev1.PersistentVolumeClaim, pvs []corev1.PersistentVolume) snapshot.Snapshot {
		s := scaleDownBase(p)
		for i, z := range []string{"eu-1a", "eu-1a", "eu-1b"} {
			s.Nodes[i].Labels[zoneKey] = z
		}
		return withVolumes(s, claims, pvs)
	}
	runCases(t, []planCase{
		{
			name: "a pod whose volume is in a zone with room elsewhere moves: the node goes",
			snap: base(light("a", claimVolume("data-0")), []corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")},
				[]corev1.PersistentVolume{pvLabelled("pv-0", zoneKey, "eu-1a")}),
			want: want{down: []string{"workers/n1"}},
		},
		{
			name: "a pod whose volume's zone has no room elsewhere keeps the node",
			snap: func() snapshot.Snapshot {
				s := base(light("a", claimVolume("data-0")), []corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")},
					[]corev1.PersistentVolume{pvLabelled("pv-0", zoneKey, "eu-1a")})
				s.Nodes[1].Labels[zoneKey] = "eu-1c"
				return s
			}(),
			want: want{},
		},
		{
			name: "a pod on a local PV keeps its node",
			snap: base(light("a", claimVolume("data-0")), []corev1.PersistentVolumeClaim{boundClaim("data-0", "pv-0")},
				[]corev1.PersistentVolume{pvAffinity("pv-0", req(corev1.LabelHostname, corev1.NodeSelectorOpIn, "n1"))}),
			want: want{},
		},
	})
}

func TestDescribeSelector(t *testing.T) {
	ns := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{req("a", corev1.NodeSelectorOpIn, "x", "y"), req("b", corev1.NodeSelectorOpExists)}},
		{MatchExpressions: []corev1.NodeSelectorRequirement{req("c", corev1.NodeSelectorOpNotIn, "z"), req("d", corev1.NodeSelectorOpGt, "3")}},
	}}
	got := describeSelector(ns)
	if want := "a in (x, y) and b exists or c not in (z) and d gt 3"; got != want {
		t.Errorf("describeSelector = %q, want %q", got, want)
	}
	if strings.Contains(describeSelector(&corev1.NodeSelector{}), "%") {
		t.Error("empty selector")
	}
}

// addRandomVolumes gives some of s's nodes and templates zones and some of
// its pods claims of every kind the planner tells apart: bound to volumes
// pinned by node affinity (zone or host) or by legacy zone labels, unbound
// of WaitForFirstConsumer classes with and without allowed topologies, of
// immediate or missing classes, missing, being deleted, and generic
// ephemeral. Claims and volumes also carry fields the planner ignores.
func addRandomVolumes(r *rand.Rand, s *snapshot.Snapshot) {
	zones := []string{"z1", "z2", "z3"}
	zoneLabel := func() (string, string) {
		if r.IntN(4) == 0 {
			return corev1.LabelFailureDomainBetaZone, pick(r, zones)
		}
		return zoneKey, pick(r, zones)
	}
	for i := range s.NodeGroups {
		if r.IntN(4) > 0 {
			k, v := zoneLabel()
			s.NodeGroups[i].Template.Labels[k] = v
		}
	}
	for i := range s.Nodes {
		if r.IntN(4) > 0 {
			k, v := zoneLabel()
			s.Nodes[i].Labels[k] = v
		}
	}
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	s.StorageClasses = []storagev1.StorageClass{
		storageClass("anywhere", wffc),
		storageClass("zonal", wffc, pick(r, zones)),
		storageClass("two-zones", wffc, zones[:2]...),
		storageClass("now", immediate),
	}
	s.StorageClasses[0].Parameters = map[string]string{"type": "gp3"}
	seq := 0
	for i := range s.Pods {
		p := &s.Pods[i]
		if r.IntN(3) > 0 {
			continue
		}
		seq++
		name := fmt.Sprintf("c%03d", seq)
		claim := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace, Labels: map[string]string{"app": "db"}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: rl("", "10Gi")}},
		}
		kind := r.IntN(10)
		if kind == 9 {
			// Generic ephemeral: the claim, if made, is named after the pod.
			cls := pick(r, []string{"anywhere", "zonal", "now", "gone"})
			claimVolume := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &cls}}}}}
			p.Spec.Volumes = append(p.Spec.Volumes, claimVolume)
			if r.IntN(2) == 0 {
				claim.Name = p.Name + "-scratch"
				claim.Spec.StorageClassName = &cls
				s.PersistentVolumeClaims = append(s.PersistentVolumeClaims, claim)
			}
			continue
		}
		claimVolume(name)(p)
		switch kind {
		case 0, 1, 2, 3:
			pv := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "ebs"}}}
			pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: p.Namespace, Name: name}
			pv.Spec.Capacity = rl("", "10Gi")
			switch kind {
			case 0:
				pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{req(zoneKey, corev1.NodeSelectorOpIn, pick(r, zones))}}}}}
			case 1:
				host := p.Spec.NodeName
				if host == "" && len(s.Nodes) > 0 {
					host = pick(r, s.Nodes).Name
				}
				pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{req(corev1.LabelHostname, corev1.NodeSelectorOpIn, host)}}}}}
			case 2:
				k, v := zoneLabel()
				if r.IntN(3) == 0 {
					v += "__" + pick(r, zones)
				}
				pv.Labels = map[string]string{k: v, "team": "db"}
			}
			pv.Status.Phase = corev1.VolumeBound
			claim.Spec.VolumeName = pv.Name
			claim.Status.Phase = corev1.ClaimBound
			if kind != 3 || r.IntN(2) == 0 {
				// kind 3 sometimes leaves the claim bound to a missing volume.
				s.PersistentVolumes = append(s.PersistentVolumes, pv)
			}
		case 4, 5, 6:
			cls := pick(r, []string{"anywhere", "zonal", "two-zones", "now", "gone"})
			if r.IntN(4) == 0 {
				claim.Annotations = map[string]string{podfacts.AnnotationStorageClass: cls}
			} else {
				claim.Spec.StorageClassName = &cls
			}
			claim.Status.Phase = corev1.ClaimPending
		case 7:
			continue // missing claim
		case 8:
			ts := metav1.NewTime(t0.Add(-time.Minute))
			claim.DeletionTimestamp = &ts
		}
		s.PersistentVolumeClaims = append(s.PersistentVolumeClaims, claim)
	}
	// A volume no pod uses.
	s.PersistentVolumes = append(s.PersistentVolumes, pvLabelled("pv-free", zoneKey, "z1"))
	slices.SortFunc(s.PersistentVolumeClaims, func(a, b corev1.PersistentVolumeClaim) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}

// TestTrimVolumes: the trimmed claim, volume and class keep what volume
// topology reads and nothing else.
func TestTrimVolumes(t *testing.T) {
	c := boundClaim("data-0", "pv-0")
	c.Labels = map[string]string{"app": "db"}
	c.Annotations = map[string]string{podfacts.AnnotationStorageClass: "old", "pv.kubernetes.io/bind-completed": "yes"}
	c.Spec.StorageClassName = ptr("gp3")
	c.Spec.Resources.Requests = rl("", "10Gi")
	c.Status.Capacity = rl("", "10Gi")
	got := snapshot.NewTrimmer().PersistentVolumeClaim(&c)
	want := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-0", Namespace: "default", Annotations: map[string]string{podfacts.AnnotationStorageClass: "old"}},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-0", StorageClassName: ptr("gp3")},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	if !equalJSON(t, got, want) {
		t.Errorf("claim:\n got %+v\nwant %+v", got, want)
	}

	pv := pvAffinity("pv-0", req(zoneKey, corev1.NodeSelectorOpIn, "z1"))
	pv.Labels = map[string]string{zoneKey: "z1", corev1.LabelTopologyRegion: "r1", "team": "db"}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "data-0", ResourceVersion: "42"}
	pv.Spec.Capacity = rl("", "10Gi")
	pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}
	gotPV := snapshot.NewTrimmer().PersistentVolume(&pv)
	wantPV := corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-0", Labels: map[string]string{zoneKey: "z1", corev1.LabelTopologyRegion: "r1"}},
		Spec: corev1.PersistentVolumeSpec{NodeAffinity: pv.Spec.NodeAffinity,
			ClaimRef: &corev1.ObjectReference{Namespace: "default", Name: "data-0"}},
	}
	if !equalJSON(t, gotPV, wantPV) {
		t.Errorf("volume:\n got %+v\nwant %+v", gotPV, wantPV)
	}

	sc := storageClass("zonal", storagev1.VolumeBindingWaitForFirstConsumer, "z1")
	sc.Parameters = map[string]string{"type": "gp3"}
	sc.MountOptions = []string{"noatime"}
	gotSC := snapshot.NewTrimmer().StorageClass(&sc)
	sc.Parameters, sc.MountOptions = nil, nil
	if !equalJSON(t, gotSC, sc) {
		t.Errorf("class:\n got %+v\nwant %+v", gotSC, sc)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(ja) == string(jb)
}

// TestReadSnapshotVolumeErrors: a bad volume object is named by its path,
// and an old document without volume objects still reads.
func TestReadSnapshotVolumeErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"duplicate claim", `{"capturedAt": "2026-11-30T10:00:00Z", "persistentVolumeClaims": [
			{"metadata": {"name": "a", "namespace": "db"}}, {"metadata": {"name": "a", "namespace": "db"}}]}`,
			"persistentVolumeClaims[1].metadata.name: duplicate db/a (also persistentVolumeClaims[0])"},
		{"unnamed volume", `{"capturedAt": "2026-11-30T10:00:00Z", "persistentVolumes": [{"metadata": {}}]}`,
			"persistentVolumes[0].metadata.name: must not be empty"},
		{"duplicate class", `{"capturedAt": "2026-11-30T10:00:00Z", "storageClasses": [{"metadata": {"name": "x"}}, {"metadata": {"name": "x"}}]}`,
			"storageClasses[1].metadata.name: duplicate x (also storageClasses[0])"},
		{"class of the wrong type", `{"capturedAt": "2026-11-30T10:00:00Z", "storageClasses": [{"metadata": {"name": "x"}, "volumeBindingMode": 3}]}`,
			"storageClasses[0]"},
		{"compact form: duplicate claim", `{"format": "nodetide.io/snapshot-compact/v1", "capturedAt": "2026-11-30T10:00:00Z", "persistentVolumeClaims": [
			{"metadata": {"name": "a", "namespace": "db"}}, {"metadata": {"name": "a", "namespace": "db"}}], "podShapes": [], "pods": []}`,
			"persistentVolumeClaims[1].metadata.name: duplicate db/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := snapshot.ReadSnapshot(strings.NewReader(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	s, err := snapshot.ReadSnapshot(strings.NewReader(`{"capturedAt": "2026-11-30T10:00:00Z", "nodes": [], "pods": [], "podDisruptionBudgets": []}`))
	if err != nil || s.PersistentVolumeClaims != nil || s.PersistentVolumes != nil || s.StorageClasses != nil {
		t.Errorf("old document: %v, %+v", err, s)
	}
}

// withClaims gives every fifth pod of s (a copy) a claim bound to a volume
// pinned to its node's zone or, with host, to its node (a local volume);
// pending pods get one in zone z1.
func withClaims(s snapshot.Snapshot, host bool) snapshot.Snapshot {
	s.Pods = slices.Clone(s.Pods)
	s.PersistentVolumeClaims, s.PersistentVolumes = nil, nil
	zoneOf := map[string]string{}
	for i := range s.Nodes {
		zoneOf[s.Nodes[i].Name] = s.Nodes[i].Labels[zoneKey]
	}
	for i := range s.Pods {
		if i%5 != 0 {
			continue
		}
		p := &s.Pods[i]
		p.Spec.Volumes = append(slices.Clone(p.Spec.Volumes), corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.Name + "-data"}}})
		c := boundClaim(p.Name+"-data", "pv-"+p.Namespace+"-"+p.Name)
		c.Namespace = p.Namespace
		var pv corev1.PersistentVolume
		switch {
		case host && p.Spec.NodeName != "":
			pv = pvAffinity(c.Spec.VolumeName, req(corev1.LabelHostname, corev1.NodeSelectorOpIn, p.Spec.NodeName))
		case p.Spec.NodeName != "":
			pv = pvAffinity(c.Spec.VolumeName, req(zoneKey, corev1.NodeSelectorOpIn, zoneOf[p.Spec.NodeName]))
		default:
			pv = pvAffinity(c.Spec.VolumeName, req(zoneKey, corev1.NodeSelectorOpIn, "z1"))
		}
		s.PersistentVolumeClaims = append(s.PersistentVolumeClaims, c)
		s.PersistentVolumes = append(s.PersistentVolumes, pv)
	}
	return s
}

// BenchmarkDecideVolumes is BenchmarkDecide with a fifth of the pods on
// volumes pinned to their zone, or to their node (local volumes, which
// no other node takes: scale-down tries every node for each of them).
func BenchmarkDecideVolumes(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, host := range []bool{false, true} {
			name := fmt.Sprintf("nodes=%d/zone", n)
			if host {
				name = fmt.Sprintf("nodes=%d/host", n)
			}
			b.Run(name, func(b *testing.B) {
				s := withClaims(benchCluster(n), host)
				set := DefaultSettings()
				b.ReportAllocs()
				for b.Loop() {
					Decide(s, set, s.CapturedAt)
				}
				b.ReportMetric(float64(len(s.PersistentVolumeClaims)), "claims")
			})
		}
	}
}
