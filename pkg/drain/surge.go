package drain

import (
	"context"
	"fmt"
	"math"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodetide/nodetide/pkg/kubeevents"
	"github.com/nodetide/nodetide/pkg/state"
)

// deploymentOf finds the Deployment that owns a pod through its ReplicaSet.
func (d *Steps) deploymentOf(ctx context.Context, p *corev1.Pod) (*appsv1.Deployment, error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return nil, nil
	}
	rs, err := d.Client.AppsV1().ReplicaSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get replicaset %s/%s: %w", p.Namespace, ref.Name, err)
	}
	dref := metav1.GetControllerOf(rs)
	if dref == nil || dref.Kind != "Deployment" {
		return nil, nil
	}
	dep, err := d.Client.AppsV1().Deployments(p.Namespace).Get(ctx, dref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get deployment %s/%s: %w", p.Namespace, dref.Name, err)
	}
	return dep, nil
}

// pdbBlocks reports whether a PDB covering the pod allows no disruption now.
func (d *Steps) pdbBlocks(ctx context.Context, p *corev1.Pod) (bool, error) {
	pdbs, err := d.Client.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list PDBs in %s: %w", p.Namespace, err)
	}
	for _, pdb := range pdbs.Items {
		// As policy/v1 reads it: an empty selector covers every pod of the
		// namespace, a null one none (LabelSelectorAsSelector gives Nothing).
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if pdb.Status.DisruptionsAllowed < 1 {
			return true, nil
		}
	}
	return false, nil
}

// surge replaces, before eviction, the pods whose eviction would leave
// their Deployment with no ready replica (one replica, or a PDB allowing no
// disruption): it raises the Deployment by the pods on this node, waits until
// the replacements are Ready elsewhere, gives the old pods the lowest
// deletion cost and restores the count, so the ReplicaSet itself removes the
// old pods. The original counts are in the drain record before anything
// changes. Called again until SurgeDone.
func (d *Steps) surge(ctx context.Context, s State, rec state.DrainRecord) (State, error) {
	s.PastDeadline = !d.now().Before(s.Deadline)
	if !s.Surge {
		s.SurgeDone = true
		return s, nil
	}
	var err error
	if len(rec.Surged) == 0 && len(rec.NotSurged) == 0 && !s.SurgeDone {
		if rec.Surged, rec.NotSurged, err = d.surgeCandidates(ctx, s.Node); err != nil {
			return s, err
		}
		if len(rec.Surged) == 0 && len(rec.NotSurged) == 0 {
			s.SurgeDone = true
			return s, nil
		}
		// Recorded before any replica count changes, so a rollback after a
		// crash restores the right numbers.
		if err := d.save(ctx, &rec); err != nil {
			return s, err
		}
		for _, n := range rec.NotSurged {
			d.surgeLeft(ctx, s.Node, n.Namespace, n.Name, "not surged: "+n.Reason)
		}
	}
	err = d.settle(ctx, func() (bool, error) {
		if err := d.surgeRound(ctx, &rec, s.Node); err != nil {
			return false, err
		}
		return allRestored(rec.Surged), nil
	})
	if err != nil {
		return s, err
	}
	s.SurgeDone = allRestored(rec.Surged)
	return s, nil
}

// surgeRound moves each surged workload one phase on: grown by its delta,
// then (once its replacements are Ready elsewhere) old pods marked cheapest
// and the delta taken back off.
func (d *Steps) surgeRound(ctx context.Context, rec *state.DrainRecord, node string) error {
	for i := range rec.Surged {
		w := &rec.Surged[i]
		if w.Restored {
			continue
		}
		if err := d.grow(ctx, rec, i); err != nil {
			return err
		}
		want, err := d.replicas(ctx, w)
		if err != nil {
			return err
		}
		ready, err := d.readyElsewhere(ctx, w, node)
		if err != nil {
			return err
		}
		if nextSurgeMove(*w, want, ready) != surgeHandOver {
			continue
		}
		for _, pod := range w.Pods {
			if err := d.annotatePod(ctx, w.Namespace, pod, DeletionCostAnnotation, strconv.Itoa(math.MinInt32)); err != nil {
				return err
			}
		}
		if err := d.shrink(ctx, rec, i); err != nil {
			return err
		}
	}
	return nil
}

// surgeMove is a surged Deployment's next move in the surge.
type surgeMove int

const (
	// surgeNone: the surge was taken back; nothing is left to do.
	surgeNone surgeMove = iota
	// surgeGrow: raise the count by the delta, recording the count found
	// first.
	surgeGrow
	// surgeGrown: the raise recorded as about to happen landed (the count
	// is the one found then plus the delta): record it, write nothing.
	surgeGrown
	// surgeWait: grown, and the replacements are not all Ready off the
	// node yet.
	surgeWait
	// surgeHandOver: the replacements are Ready off the node: the old pods
	// get the lowest deletion cost and the delta is taken back.
	surgeHandOver
)

// nextSurgeMove decides a surged Deployment's next move from its record
// entry and what was read of it: found, its replica count now, and ready,
// its Ready pods off the node (read only once it is grown). A count that is
// neither the one found before the raise nor that plus the delta (a person
// changed it too) is taken as not grown, since one replica too many is
// better than one too few.
func nextSurgeMove(w state.SurgedWorkload, found, ready int32) surgeMove {
	switch {
	case w.Restored:
		return surgeNone
	case w.Grown && ready < found-w.Delta:
		return surgeWait
	case w.Grown:
		return surgeHandOver
	case w.Growing && found == addReplicas(w.GrowFrom, w.Delta):
		return surgeGrown
	}
	return surgeGrow
}

func allRestored(ws []state.SurgedWorkload) bool {
	for _, w := range ws {
		if !w.Restored {
			return false
		}
	}
	return true
}

// surgeCandidates are the Deployments with pods on the node that cannot
// lose a pod without losing availability: those to surge, and those an HPA
// manages, which are not surged (see hpaFor).
func (d *Steps) surgeCandidates(ctx context.Context, node string) ([]state.SurgedWorkload, []state.NotSurged, error) {
	pods, err := d.podsOn(ctx, node)
	if err != nil {
		return nil, nil, err
	}
	byDep := map[types.NamespacedName]*state.SurgedWorkload{}
	notSurgedSeen := map[types.NamespacedName]bool{}
	var order []types.NamespacedName
	var notSurged []state.NotSurged
	hpas := map[string][]autoscalingv2.HorizontalPodAutoscaler{}
	for i := range pods {
		p := &pods[i]
		if !movable(p) || p.DeletionTimestamp != nil {
			continue
		}
		dep, err := d.deploymentOf(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		if dep == nil || dep.Spec.Replicas == nil {
			continue
		}
		key := types.NamespacedName{Namespace: dep.Namespace, Name: dep.Name}
		if w, ok := byDep[key]; ok {
			w.Pods = append(w.Pods, p.Name)
			continue
		}
		if notSurgedSeen[key] {
			continue
		}
		blocked := *dep.Spec.Replicas == 1
		if !blocked {
			if blocked, err = d.pdbBlocks(ctx, p); err != nil {
				return nil, nil, err
			}
		}
		if !blocked {
			continue
		}
		if _, listed := hpas[dep.Namespace]; !listed {
			if hpas[dep.Namespace], err = d.hpasIn(ctx, dep.Namespace); err != nil {
				return nil, nil, err
			}
		}
		if hpa := hpaFor(dep, hpas[dep.Namespace]); hpa != "" {
			notSurgedSeen[key] = true
			notSurged = append(notSurged, state.NotSurged{Namespace: dep.Namespace, Name: dep.Name,
				Reason: fmt.Sprintf("HorizontalPodAutoscaler %s sets its replicas; its pods are evicted under their PodDisruptionBudgets", hpa)})
			continue
		}
		byDep[key] = &state.SurgedWorkload{Namespace: dep.Namespace, Name: dep.Name, OriginalReplicas: *dep.Spec.Replicas, Pods: []string{p.Name}}
		order = append(order, key)
	}
	out := make([]state.SurgedWorkload, 0, len(order))
	for _, k := range order {
		w := byDep[k]
		w.Delta = int32(len(w.Pods))
		out = append(out, *w)
	}
	return out, notSurged, nil
}

// hpasIn lists the HorizontalPodAutoscalers of a namespace.
func (d *Steps) hpasIn(ctx context.Context, ns string) ([]autoscalingv2.HorizontalPodAutoscaler, error) {
	list, err := d.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list HorizontalPodAutoscalers in %s: %w", ns, err)
	}
	return list.Items, nil
}

// surgeLeft says, in the log and as an event on the Deployment, that the
// drain of node left its replica count as it found it.
func (d *Steps) surgeLeft(ctx context.Context, node, ns, name, why string) {
	d.log().Info("surge left replicas as found", "node", node, "deployment", ns+"/"+name, "why", why)
	d.Events.Record(ctx, kubeevents.Event{Object: kubeevents.Deployment(ns, name, ""), Type: corev1.EventTypeNormal,
		Reason: kubeevents.ReasonSurgeLeft, Message: fmt.Sprintf("drain of node %s: %s", node, why)})
}

func (d *Steps) replicas(ctx context.Context, w *state.SurgedWorkload) (int32, error) {
	scale, err := d.Client.AppsV1().Deployments(w.Namespace).GetScale(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("deployment %s/%s: get scale: %w", w.Namespace, w.Name, err)
	}
	return scale.Spec.Replicas, nil
}

// readyElsewhere counts the Deployment's Ready pods off the node.
func (d *Steps) readyElsewhere(ctx context.Context, w *state.SurgedWorkload, node string) (int32, error) {
	dep, err := d.Client.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("get deployment %s/%s: %w", w.Namespace, w.Name, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return 0, fmt.Errorf("deployment %s/%s: selector: %w", w.Namespace, w.Name, err)
	}
	pods, err := d.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return 0, fmt.Errorf("list pods of deployment %s/%s: %w", w.Namespace, w.Name, err)
	}
	var n int32
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Spec.NodeName != node && p.DeletionTimestamp == nil && podReady(&p) {
			n++
		}
	}
	return n, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (d *Steps) annotatePod(ctx context.Context, ns, name, key, value string) error {
	var patch string
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, key)
	} else {
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	}
	_, err := d.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotate pod %s/%s: %w", ns, name, err)
	}
	return nil
}
