package planner

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/snapshot"
	"github.com/nodetide/nodetide/pkg/snapshot/snapshottest"
)

// fieldSample sets a pod field to one of two values (variant 0 or 1) that
// change what a check decides, and reads the field back.
type fieldSample struct {
	set func(p *corev1.Pod, variant int)
	get func(p *corev1.Pod) any
	// extra adds the objects the field needs to matter (claims, pods).
	extra func(s *snapshot.Snapshot)
}

// fieldSamples has one sample for every field a placement check reads.
func fieldSamples() map[podField]fieldSample {
	two := func(v int, a, b string) string { return [2]string{a, b}[v] }
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	always := corev1.ContainerRestartPolicyAlways
	return map[podField]fieldSample{
		fieldNodeSelector: {
			set: func(p *corev1.Pod, v int) { p.Spec.NodeSelector = map[string]string{"disk": two(v, "ssd", "hdd")} },
			get: func(p *corev1.Pod) any { return p.Spec.NodeSelector },
		},
		fieldNodeAffinity: {
			set: func(p *corev1.Pod, v int) {
				affinity([]corev1.NodeSelectorRequirement{req("disk", corev1.NodeSelectorOpIn, two(v, "ssd", "hdd"))})(p)
			},
			get: func(p *corev1.Pod) any { return requiredAffinity(p) },
		},
		fieldTolerations: {
			set: func(p *corev1.Pod, v int) { tolerate("dedicated", two(v, "a", "b"), corev1.TaintEffectNoSchedule)(p) },
			get: func(p *corev1.Pod) any { return p.Spec.Tolerations },
		},
		fieldVolumes: {
			set: func(p *corev1.Pod, v int) {
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: two(v, "data-0", "data-1")}}}}
			},
			get: func(p *corev1.Pod) any { return p.Spec.Volumes },
			extra: func(s *snapshot.Snapshot) {
				class := "local"
				s.StorageClasses = []storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: class}, VolumeBindingMode: &wffc}}
				for _, name := range []string{"data-0", "data-1"} {
					s.PersistentVolumeClaims = append(s.PersistentVolumeClaims, corev1.PersistentVolumeClaim{
						ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}})
				}
			},
		},
		fieldPodAffinity: {
			set: func(p *corev1.Pod, v int) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: two(v, labelZone, labelHostname), LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
			},
			get: func(p *corev1.Pod) any { return p.Spec.Affinity },
		},
		fieldTopologySpread: {
			set: func(p *corev1.Pod, v int) {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: int32(1 + v), TopologyKey: labelZone,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
			},
			get: func(p *corev1.Pod) any { return p.Spec.TopologySpreadConstraints },
		},
		fieldLabels: {
			set: func(p *corev1.Pod, v int) {
				p.Labels = map[string]string{"app": "web", "tier": two(v, "front", "back")}
			},
			get: func(p *corev1.Pod) any { return p.Labels },
			extra: func(s *snapshot.Snapshot) {
				// A pod whose zone-keyed anti-affinity selects one variant.
				g := pod("default/guard", "100m", "128Mi", on("n1"), podLabels("app", "guard"))
				g.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: labelZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}}}}}}
				s.Pods = append(s.Pods, g)
			},
		},
		fieldContainerRequests: {
			set: func(p *corev1.Pod, v int) {
				p.Spec.Containers[0].Resources.Requests = rl(two(v, "100m", "200m"), "128Mi")
			},
			get: func(p *corev1.Pod) any { return p.Spec.Containers[0].Resources.Requests },
		},
		fieldInitContainers: {
			// A sidecar runs beside the app; a plain init container before it.
			set: func(p *corev1.Pod, v int) {
				c := corev1.Container{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("100m", "128Mi")}}
				if v == 1 {
					c.RestartPolicy = &always
				}
				p.Spec.InitContainers = []corev1.Container{c}
			},
			get: func(p *corev1.Pod) any {
				c := p.Spec.InitContainers[0]
				return []any{c.Resources.Requests, c.RestartPolicy}
			},
		},
		fieldOverhead: {
			set: func(p *corev1.Pod, v int) { p.Spec.Overhead = rl(two(v, "10m", "20m"), "") },
			get: func(p *corev1.Pod) any { return p.Spec.Overhead },
		},
		fieldPodResources: {
			set: func(p *corev1.Pod, v int) {
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl(two(v, "1", "2"), "")}
			},
			get: func(p *corev1.Pod) any { return p.Spec.Resources.Requests },
		},
	}
}

// twoPods is a cluster with two pending pods of one ReplicaSet, "a" and
// "b", that differ only in field f.
func twoPods(f fieldSample) snapshot.Snapshot {
	a := pod("default/a", "100m", "128Mi", pending())
	b := pod("default/b", "100m", "128Mi", pending())
	f.set(&a, 0)
	f.set(&b, 1)
	s := clusterOf([]snapshot.NodeGroup{workers(1, "n1")}, []corev1.Node{node("n1", "workers", "4", "16Gi")}, []corev1.Pod{a, b})
	if f.extra != nil {
		f.extra(&s)
	}
	return s
}

func podIndex(t *testing.T, s *snapshot.Snapshot, name string) int32 {
	t.Helper()
	for i := range s.Pods {
		if s.Pods[i].Name == name {
			return int32(i)
		}
	}
	t.Fatalf("no pod %s", name)
	return -1
}

// TestCheckFieldsKeptAndClassed: every pod field a placement check reads
// survives the Trimmer and the compact form, and two pods that differ only
// in it are in different classes (so one cannot stand for the other), with
// their difference seen by both the class's bucket and its equality.
func TestCheckFieldsKeptAndClassed(t *testing.T) {
	samples := fieldSamples()
	seen := map[podField]bool{}
	ids := map[checkID]bool{}
	groupChecks := false
	for _, ck := range placementChecks {
		if ids[ck.id] {
			t.Errorf("check %q: id %d used twice", ck.name, ck.id)
		}
		ids[ck.id] = true
		if ck.group {
			groupChecks = true
		} else if groupChecks {
			t.Errorf("check %q: a node check after a group check (the node checks come first)", ck.name)
		}
		if len(ck.fields) == 0 {
			t.Errorf("check %q names no pod field", ck.name)
		}
		for _, f := range ck.fields {
			if seen[f] {
				continue
			}
			seen[f] = true
			sample, ok := samples[f]
			if !ok {
				t.Errorf("check %q reads %s, which has no sample here", ck.name, f)
				continue
			}
			checkFieldKept(t, ck.name, f, sample)
		}
	}
}

func checkFieldKept(t *testing.T, check string, f podField, sample fieldSample) {
	t.Helper()
	s := twoPods(sample)

	trimmed := deepCopySnapshot(s)
	snapshot.NewTrimmer().Snapshot(&trimmed)
	for _, name := range []string{"a", "b"} {
		orig, got := &s.Pods[podIndex(t, &s, name)], &trimmed.Pods[podIndex(t, &trimmed, name)]
		if !reflect.DeepEqual(sample.get(got), sample.get(orig)) {
			t.Errorf("check %q reads %s, which the Trimmer does not keep: pod %s has %+v, want %+v", check, f, name, sample.get(got), sample.get(orig))
		}
	}
	forms := []struct {
		name string
		s    snapshot.Snapshot
	}{
		{"as listed", s},
		{"trimmed", trimmed},
		{"compact form", snapshottest.Read(t, snapshottest.Write(t, s, true))},
	}
	for _, form := range forms {
		m := newModel(&form.s, DefaultSettings(), form.s.CapturedAt)
		a, b := podIndex(t, &form.s, "a"), podIndex(t, &form.s, "b")
		ca := m.classOf(a)
		if m.classOf(b) == ca {
			t.Errorf("check %q reads %s: %s, pods differing only in it share a class", check, f, form.name)
			continue
		}
		ha, _, _ := m.classIdentity(a)
		hb, setB, volB := m.classIdentity(b)
		if ha == hb {
			t.Errorf("check %q reads %s: %s, the class bucket (classHash) does not tell the pods apart", check, f, form.name)
		}
		if m.inClass(ca, b, setB, volB) {
			t.Errorf("check %q reads %s: %s, class equality (sameConstraints) does not tell the pods apart", check, f, form.name)
		}
	}
}

// TestEveryCheckCanFail: each check of placementChecks refuses a new node
// when its rule is broken, with its own reason, code and text, and the
// yes/no agrees; a pod that breaks none fits.
func TestEveryCheckCanFail(t *testing.T) {
	zonal := func(s *snapshot.Snapshot) { s.NodeGroups[0].Zones = []string{"za", "zb"} }
	cases := []struct {
		check string // "" for a case that is not one check's
		why   misfit
		code  string
		pod   func(p *corev1.Pod)
		snap  func(s *snapshot.Snapshot)
	}{
		{"", misfitNone, "", func(*corev1.Pod) {}, nil},
		{"node selector", misfitSelector, ReasonNodeSelector, selector("disk", "ssd"), nil},
		{"node affinity", misfitAffinity, ReasonNodeSelector, affinity([]corev1.NodeSelectorRequirement{req("disk", corev1.NodeSelectorOpIn, "ssd")}), nil},
		{"taints", misfitTaint, ReasonTaint, func(*corev1.Pod) {}, func(s *snapshot.Snapshot) {
			s.NodeGroups[0] = withTemplateTaint(s.NodeGroups[0], "dedicated", "a", corev1.TaintEffectNoSchedule)
		}},
		{"volumes", misfitVolumeBlocked, ReasonVolume, func(p *corev1.Pod) { fieldSamples()[fieldVolumes].set(p, 0) }, func(s *snapshot.Snapshot) {
			// The claim does not exist.
			s.StorageClasses = []storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "local"}}}
		}},
		{"zone rules", misfitZoneRule, ReasonOther, func(p *corev1.Pod) { fieldSamples()[fieldTopologySpread].set(p, 0) }, zonal},
		{"room", misfitRoom, ReasonInsufficient, func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = rl("64", "1Gi") }, nil},
		{"", misfitZoneSplit, ReasonNodeSelector, selector(labelZone, "za"), zonal},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.check] = true
		p := pod("default/a", "100m", "128Mi", pending())
		tc.pod(&p)
		s := clusterOf([]snapshot.NodeGroup{workers(0)}, nil, []corev1.Pod{p})
		if tc.snap != nil {
			tc.snap(&s)
		}
		m := newModel(&s, DefaultSettings(), s.CapturedAt)
		c := m.classOf(0)
		v := m.templateVerdict(c, 0)
		text := m.templateMisfit(c, 0, v)
		if v.why != tc.why || (tc.why != misfitNone && (v.code() != tc.code || text == "")) {
			t.Errorf("%s: reason %d, code %q, text %q; want reason %d, code %q", tc.check, v.why, v.code(), text, tc.why, tc.code)
		}
		if fits := m.fitsTemplate(c, 0); fits != (tc.why == misfitNone) {
			t.Errorf("%s: fitsTemplate %v, verdict %d", tc.check, fits, v.why)
		}
	}
	for _, ck := range placementChecks {
		if !covered[ck.name] {
			t.Errorf("check %q has no case here", ck.name)
		}
	}
}

// TestFitPathAllocatesNothing: the yes/no of every check, on registered
// nodes and on templates over one zone and several, allocates nothing (it
// runs for every class against every node and group).
func TestFitPathAllocatesNothing(t *testing.T) {
	samples := fieldSamples()
	for _, f := range []podField{fieldNodeSelector, fieldNodeAffinity, fieldTolerations, fieldVolumes, fieldTopologySpread} {
		s := twoPods(samples[f])
		zonal := group("zonal", 0, 10, 0, "4", "16Gi")
		zonal.Zones = []string{"za", "zb"}
		s.NodeGroups = append(s.NodeGroups, zonal)
		m := newModel(&s, DefaultSettings(), s.CapturedAt)
		c := m.classOf(podIndex(t, &s, "a"))
		if n := testing.AllocsPerRun(50, func() {
			m.fitsNode(c, 0)
			m.fitsTemplate(c, 0)
			m.fitsTemplate(c, 1)
		}); n != 0 {
			t.Errorf("%s: %v allocations a run", f, n)
		}
	}
}
