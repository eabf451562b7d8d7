package k8s

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodetide/nodetide/internal/testbed"
)

// asFunction applies deploy/rbac.yaml and returns a read client that acts
// as a member of the function's group (nodetide-<fn>), so a test sees what
// the function's RBAC lets it read.
func asFunction(t *testing.T, cp *testbed.ControlPlane, fn string) kubernetes.Interface {
	t.Helper()
	f, err := os.Open("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	ctx := t.Context()
	rbac := cp.Client.RbacV1()
	for {
		var obj struct {
			Kind string `json:"kind"`
			rbacv1.ClusterRole
			Subjects []rbacv1.Subject `json:"subjects"`
			RoleRef  rbacv1.RoleRef   `json:"roleRef"`
		}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if obj.Name != "nodetide-"+fn {
			continue
		}
		switch obj.Kind {
		case "ClusterRole":
			role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: obj.Name}, Rules: obj.Rules}
			if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				_, err = rbac.ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: obj.Name}, Subjects: obj.Subjects, RoleRef: obj.RoleRef}
			if _, err := rbac.ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	cfg := rest.CopyConfig(ReadConfig(cp.Config))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nodetide-" + fn + "-test", Groups: []string{"nodetide-" + fn}}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The authorizer's cache may lag the new role briefly.
	cp.WaitFor(t, time.Minute, "the function's role to allow listing claims", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	return client
}

// mineVolumes keeps of objs the volume objects of the test (named or in
// namespace ns).
func mineVolumes(objs Objects, ns string) Objects {
	var out Objects
	for _, c := range objs.PersistentVolumeClaims {
		if c.Namespace == ns {
			out.PersistentVolumeClaims = append(out.PersistentVolumeClaims, c)
		}
	}
	for _, v := range objs.PersistentVolumes {
		if strings.HasPrefix(v.Name, ns+"-") {
			out.PersistentVolumes = append(out.PersistentVolumes, v)
		}
	}
	for _, sc := range objs.StorageClasses {
		if strings.HasPrefix(sc.Name, ns+"-") {
			out.StorageClasses = append(out.StorageClasses, sc)
		}
	}
	return out
}

// TestReaderVolumesLive: claims, volumes and storage classes are listed,
// trimmed, and caught up through the watch, as evaluate's RBAC lets it:
// a warm read lists no kind afresh.
func TestReaderVolumesLive(t *testing.T) {
	cp := testbed.Cluster(t)
	ns := cp.Namespace(t)
	ctx := t.Context()
	cs := cp.Client
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := func(name, zone string) *storagev1.StorageClass {
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			Provisioner: "example.com/none", VolumeBindingMode: &wffc,
			Parameters: map[string]string{"type": "gp3"},
			AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
				{Key: corev1.LabelTopologyZone, Values: []string{zone}}}}}}
	}
	cleanup := func(del func(context.Context) error) {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := del(ctx); err != nil && !apierrors.IsNotFound(err) {
				t.Log(err)
			}
		})
	}
	mkClass := func(sc *storagev1.StorageClass) {
		if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cleanup(func(ctx context.Context) error {
			return cs.StorageV1().StorageClasses().Delete(ctx, sc.Name, metav1.DeleteOptions{})
		})
	}
	mkClass(class("zonal", "z1"))
	pvName := ns + "-pv0"
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Labels: map[string]string{corev1.LabelTopologyZone: "z1", "team": "db"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              ns + "-zonal",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + pvName}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "data-0"},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}}}}}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cleanup(func(ctx context.Context) error {
		return cs.CoreV1().PersistentVolumes().Delete(ctx, pvName, metav1.DeleteOptions{})
	})
	claim := func(name, volume, class string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "db"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				StorageClassName: &class, VolumeName: volume,
			},
		}
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("data-0", pvName, ns+"-zonal"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller-manager's binder completes the pre-binding.
	cp.WaitFor(t, time.Minute, "claim data-0 bound", func(ctx context.Context) (bool, error) {
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-0", metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound, err
	})

	client := asFunction(t, cp, "evaluate")
	r := NewReader(client, nil)
	objs, st, err := r.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if objs.VolumesSkipped != "" {
		t.Fatalf("volumes skipped: %s", objs.VolumesSkipped)
	}
	if want := []string{"nodes", "pods", "poddisruptionbudgets", "persistentvolumeclaims", "persistentvolumes", "storageclasses"}; !slices.Equal(st.Listed, want) {
		t.Fatalf("first read listed %v, want %v", st.Listed, want)
	}
	mine := mineVolumes(objs, ns)
	if len(mine.PersistentVolumeClaims) != 1 || len(mine.PersistentVolumes) != 1 || len(mine.StorageClasses) != 1 {
		t.Fatalf("first read: %d claims, %d volumes, %d classes, want 1 of each", len(mine.PersistentVolumeClaims), len(mine.PersistentVolumes), len(mine.StorageClasses))
	}
	c, v, sc := mine.PersistentVolumeClaims[0], mine.PersistentVolumes[0], mine.StorageClasses[0]
	switch {
	case c.Spec.VolumeName != pvName || c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != ns+"-zonal" || c.Status.Phase != corev1.ClaimBound:
		t.Errorf("claim %+v", c)
	case c.Labels != nil || c.Spec.Resources.Requests != nil:
		t.Errorf("claim not trimmed: %+v", c)
	case v.Labels[corev1.LabelTopologyZone] != "z1" || v.Labels["team"] != "" || v.Spec.NodeAffinity == nil || v.Spec.ClaimRef == nil || v.Spec.ClaimRef.Name != "data-0":
		t.Errorf("volume %+v", v)
	case v.Spec.HostPath != nil || v.Spec.Capacity != nil:
		t.Errorf("volume not trimmed: %+v", v)
	case sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != wffc || len(sc.AllowedTopologies) != 1 || sc.Parameters != nil:
		t.Errorf("class %+v", sc)
	case c.APIVersion != "v1" || c.Kind != "PersistentVolumeClaim" || sc.APIVersion != "storage.k8s.io/v1":
		t.Errorf("type meta: claim %v, class %v", c.TypeMeta, sc.TypeMeta)
	}

	// Changes while the reader is idle: the volume moves zone, a claim and
	// a class are added, the first class goes.
	if _, err := cs.CoreV1().PersistentVolumes().Patch(ctx, pvName, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"topology.kubernetes.io/zone":"z2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	mkClass(class("other", "z3"))
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("data-1", "", ns+"-other"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.StorageV1().StorageClasses().Delete(ctx, ns+"-zonal", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	objs, st, err = r.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Listed) != 0 || st.Events == 0 {
		t.Fatalf("warm read listed %v and applied %d events, want every kind caught up", st.Listed, st.Events)
	}
	mine = mineVolumes(objs, ns)
	got := names(mine.PersistentVolumeClaims, func(c *corev1.PersistentVolumeClaim) string { return c.Name })
	if !slices.Equal(got, []string{"data-0", "data-1"}) {
		t.Errorf("claims after catch-up %v", got)
	}
	if got := names(mine.StorageClasses, func(c *storagev1.StorageClass) string { return c.Name }); !slices.Equal(got, []string{ns + "-other"}) {
		t.Errorf("classes after catch-up %v", got)
	}
	if len(mine.PersistentVolumes) != 1 || mine.PersistentVolumes[0].Labels[corev1.LabelTopologyZone] != "z2" {
		t.Errorf("volume after catch-up %+v: the label change was missed", mine.PersistentVolumes)
	}
}
