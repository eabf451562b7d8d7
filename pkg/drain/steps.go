package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/state"
)

// Steps runs the drain steps against a cluster, its node groups and the
// drain records.
type Steps struct {
	Client kubernetes.Interface
	Groups func(ctx context.Context) ([]providers.NodeGroup, error)
	Store  state.DrainStore
	// MinSize, when set, gives a group's effective minimum (a schedule can
	// raise it); otherwise the group's own.
	MinSize func(ctx context.Context, g providers.NodeGroup) (int, error)
	Now     func() time.Time
	Log     *slog.Logger
	// StepWait is how long a step keeps checking for progress it can expect
	// within seconds (an evicted pod going away, a replacement turning
	// Ready) before handing back to the state machine's Wait loop; it saves
	// a 10 s round in most drains. Zero means 5 s; negative, no waiting.
	StepWait time.Duration
}

func (d *Steps) stepWait() time.Duration {
	switch {
	case d.StepWait < 0:
		return 0
	case d.StepWait == 0:
		return 5 * time.Second
	}
	return d.StepWait
}

// settle calls once until it reports done or the step wait runs out.
func (d *Steps) settle(ctx context.Context, once func() (done bool, err error)) error {
	until := time.Now().Add(d.stepWait())
	for {
		done, err := once()
		if err != nil || done || !time.Now().Before(until) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (d *Steps) now() time.Time {
	if d.Now != nil {
		return d.Now().UTC()
	}
	return time.Now().UTC()
}

func (d *Steps) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

// Run dispatches one step by name.
func (d *Steps) Run(ctx context.Context, step string, s State) (State, error) {
	fns := map[string]func(context.Context, State) (State, error){
		"Prepare": d.Prepare, "Cordon": d.Cordon, "Surge": d.SurgeStep, "Evict": d.Evict,
		"ForceDelete": d.ForceDelete, "WaitReplacements": d.WaitReplacements, "Terminate": d.Terminate,
		"RemoveNode": d.RemoveNode, "Finish": d.Finish, "Rollback": d.Rollback,
	}
	fn, ok := fns[step]
	if !ok {
		names := make([]string, 0, len(fns))
		for k := range fns {
			names = append(names, k)
		}
		slices.Sort(names)
		return s, stepErr(ErrNameInvalidInput, "unknown step %q (one of %v)", step, names)
	}
	if err := s.Validate(); err != nil {
		return s, &StepError{Name: ErrNameInvalidInput, Err: fmt.Errorf("step %s: %w", step, err)}
	}
	start := time.Now()
	out, err := fn(ctx, s)
	attrs := []any{"step", step, "node", s.Node, "drainId", s.DrainID, "ms", time.Since(start).Milliseconds()}
	if err != nil {
		d.log().Warn("drain step failed", append(attrs, "error", err.Error(), "errorName", ErrorName(err))...)
		return s, err
	}
	d.log().Info("drain step", append(attrs, "remaining", len(out.Remaining))...)
	return out, nil
}

// ErrorName is the name the state machine sees for err: Transient for what a
// retry can fix, a specific name for what it cannot.
func ErrorName(err error) string {
	var se *StepError
	var netErr net.Error
	switch {
	case errors.As(err, &se):
		return se.Name
	case errors.Is(err, state.ErrDraining):
		return ErrNameAlreadyDraining
	case errors.Is(err, providers.ErrBelowMin):
		return ErrNameBelowMinSize
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return ErrNameForbidden
	case apierrors.IsConflict(err), apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err),
		apierrors.IsTimeout(err), apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsUnexpectedServerError(err), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr):
		return ErrNameTransient
	}
	return ErrNameFailed
}

// Prepare checks the node can be drained and claims it: it exists, belongs
// to a managed group (by providerID), nothing on it must not be disrupted
// (unless Force), removing it keeps the group at or above its effective
// minimum (with BelowMin, the minimum its provider enforces), and no other
// drain holds it.
func (d *Steps) Prepare(ctx context.Context, s State) (State, error) {
	node, err := d.Client.CoreV1().Nodes().Get(ctx, s.Node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return s, stepErr(ErrNameNodeNotFound, "node %s does not exist", s.Node)
	}
	if err != nil {
		return s, fmt.Errorf("get node %s: %w", s.Node, err)
	}
	g, err := d.groupOf(ctx, node.Spec.ProviderID)
	if err != nil {
		return s, err
	}
	if g == nil {
		return s, stepErr(ErrNameNotManaged, "node %s (providerID %q) belongs to no managed node group", s.Node, node.Spec.ProviderID)
	}
	if s.NodeGroup != "" && s.NodeGroup != g.Name() {
		return s, stepErr(ErrNameNotManaged, "node %s belongs to node group %s, not %s", s.Node, g.Name(), s.NodeGroup)
	}
	s.NodeGroup, s.ProviderID = g.Name(), node.Spec.ProviderID

	active, _, err := d.Store.NodeDrain(ctx, s.Node)
	if err != nil {
		return s, err
	}
	if active != s.DrainID { // a re-run of our own Prepare has been checked already
		if err := d.checkDisruptable(ctx, node, s); err != nil {
			return s, err
		}
	}
	if active != s.DrainID && !s.BelowMin { // a re-run of our own Prepare has counted itself already
		if err := d.checkMin(ctx, g, s.Node); err != nil {
			return s, err
		}
	}
	if active != s.DrainID && s.BelowMin {
		if err := d.checkOwnMin(ctx, g, s.Node); err != nil {
			return s, err
		}
	}
	rec, err := d.Store.BeginDrain(ctx, state.DrainRecord{Node: s.Node, ID: s.DrainID, NodeGroup: g.Name(), StartedAt: d.now()})
	if err != nil {
		return s, err
	}
	if rec.Status != state.DrainRunning {
		return s, stepErr(ErrNameAlreadyDraining, "drain %s of node %s already ended (%s)", s.DrainID, s.Node, rec.Status)
	}
	return s, nil
}

func (d *Steps) groupOf(ctx context.Context, providerID string) (providers.NodeGroup, error) {
	if providerID == "" {
		return nil, nil
	}
	groups, err := d.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("node groups: %w", err)
	}
	for _, g := range groups {
		insts, err := g.Instances(ctx)
		if err != nil {
			return nil, fmt.Errorf("node group %s: instances: %w", g.Name(), err)
		}
		for _, in := range insts {
			if in.ProviderID == providerID {
				return g, nil
			}
		}
	}
	return nil, nil
}

func (d *Steps) group(ctx context.Context, name string) (providers.NodeGroup, error) {
	groups, err := d.Groups(ctx)
	if err != nil {
		return nil, fmt.Errorf("node groups: %w", err)
	}
	for _, g := range groups {
		if g.Name() == name {
			return g, nil
		}
	}
	return nil, stepErr(ErrNameNotManaged, "node group %s is not managed", name)
}

// checkMin refuses a removal that would take the group below its effective
// minimum, counting the drains already under way in it.
func (d *Steps) checkMin(ctx context.Context, g providers.NodeGroup, node string) error {
	target, err := g.TargetSize(ctx)
	if err != nil {
		return fmt.Errorf("node group %s: target size: %w", g.Name(), err)
	}
	minSize := g.MinSize()
	if d.MinSize != nil {
		if minSize, err = d.MinSize(ctx, g); err != nil {
			return err
		}
	}
	draining, err := d.drainingIn(ctx, g, node)
	if err != nil {
		return err
	}
	if target-draining-1 < minSize {
		setBy := ""
		if from := providers.MinFrom(g); from != "" {
			setBy = " (set by " + from + ")"
		}
		return stepErr(ErrNameBelowMinSize, "removing node %s would leave node group %s with %d nodes (target %d, %d already draining), below its min size %d%s",
			node, g.Name(), target-draining-1, target, draining, minSize, setBy)
	}
	return nil
}

func (d *Steps) drainingIn(ctx context.Context, g providers.NodeGroup, except string) (int, error) {
	insts, err := g.Instances(ctx)
	if err != nil {
		return 0, fmt.Errorf("node group %s: instances: %w", g.Name(), err)
	}
	ids := map[string]bool{}
	for _, in := range insts {
		ids[in.ProviderID] = true
	}
	nodes, err := d.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	n := 0
	for _, node := range nodes.Items {
		if node.Name != except && ids[node.Spec.ProviderID] && hasTaint(&node, TaintKey) {
			n++
		}
	}
	return n, nil
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// Cordon makes the node unschedulable and taints it as draining.
func (d *Steps) Cordon(ctx context.Context, s State) (State, error) {
	return s, k8s.Cordon(ctx, d.Client, s.Node, TaintKey)
}

// podsOn lists the pods bound to a node.
func (d *Steps) podsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := d.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	return list.Items, nil
}

// movable reports whether a drain moves the pod: DaemonSet and mirror pods
// stay with the node, terminal pods are done.
func movable(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
		return false
	}
	return true
}

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

// workloadOf names the controller whose replacement the drain waits for.
func (d *Steps) workloadOf(ctx context.Context, p *corev1.Pod) (*Workload, error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return nil, nil
	}
	switch ref.Kind {
	case "ReplicaSet":
		dep, err := d.deploymentOf(ctx, p)
		if err != nil {
			return nil, err
		}
		if dep != nil {
			return &Workload{Kind: "Deployment", Namespace: p.Namespace, Name: dep.Name}, nil
		}
		return &Workload{Kind: "ReplicaSet", Namespace: p.Namespace, Name: ref.Name}, nil
	case "StatefulSet":
		return &Workload{Kind: "StatefulSet", Namespace: p.Namespace, Name: ref.Name}, nil
	}
	return nil, nil
}

// pdbBlocks reports whether a PDB covering the pod allows no disruption now.
func (d *Steps) pdbBlocks(ctx context.Context, p *corev1.Pod) (bool, error) {
	pdbs, err := d.Client.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list PDBs in %s: %w", p.Namespace, err)
	}
	for _, pdb := range pdbs.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		if pdb.Status.DisruptionsAllowed < 1 {
			return true, nil
		}
	}
	return false, nil
}

// SurgeStep replaces, before eviction, the pods whose eviction would leave
// their Deployment with no ready replica (one replica, or a PDB allowing no
// disruption): it raises the Deployment by the pods on this node, waits until
// the replacements are Ready elsewhere, gives the old pods the lowest
// deletion cost and restores the count, so the ReplicaSet itself removes the
// old pods. The original counts are in the drain record before anything
// changes. Called again until SurgeDone.
func (d *Steps) SurgeStep(ctx context.Context, s State) (State, error) {
	s.PastDeadline = !d.now().Before(s.Deadline)
	if !s.Surge {
		s.SurgeDone = true
		return s, nil
	}
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if err != nil {
		return s, err
	}
	if len(rec.Surged) == 0 && !s.SurgeDone {
		if rec.Surged, err = d.surgeCandidates(ctx, s.Node); err != nil {
			return s, err
		}
		if len(rec.Surged) == 0 {
			s.SurgeDone = true
			return s, nil
		}
		// Recorded before any replica count changes, so a rollback after a
		// crash restores the right numbers.
		if err := d.Store.UpdateDrain(ctx, rec); err != nil {
			return s, err
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

// surgeRound moves each surged workload one phase on: grown, then (once its
// replacements are Ready elsewhere) old pods marked cheapest and the count
// restored.
func (d *Steps) surgeRound(ctx context.Context, rec *state.DrainRecord, node string) error {
	for i := range rec.Surged {
		w := &rec.Surged[i]
		if w.Restored {
			continue
		}
		surged := w.OriginalReplicas + int32(len(w.Pods))
		if err := d.setReplicas(ctx, w.Namespace, w.Name, surged); err != nil {
			return err
		}
		ready, err := d.readyElsewhere(ctx, w, node)
		if err != nil {
			return err
		}
		if ready < w.OriginalReplicas {
			continue
		}
		for _, pod := range w.Pods {
			if err := d.annotatePod(ctx, w.Namespace, pod, DeletionCostAnnotation, strconv.Itoa(math.MinInt32)); err != nil {
				return err
			}
		}
		if err := d.setReplicas(ctx, w.Namespace, w.Name, w.OriginalReplicas); err != nil {
			return err
		}
		w.Restored = true
		if err := d.Store.UpdateDrain(ctx, *rec); err != nil {
			return err
		}
	}
	return nil
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
// lose a pod without losing availability.
func (d *Steps) surgeCandidates(ctx context.Context, node string) ([]state.SurgedWorkload, error) {
	pods, err := d.podsOn(ctx, node)
	if err != nil {
		return nil, err
	}
	byDep := map[types.NamespacedName]*state.SurgedWorkload{}
	var order []types.NamespacedName
	for i := range pods {
		p := &pods[i]
		if !movable(p) || p.DeletionTimestamp != nil {
			continue
		}
		dep, err := d.deploymentOf(ctx, p)
		if err != nil {
			return nil, err
		}
		if dep == nil || dep.Spec.Replicas == nil {
			continue
		}
		key := types.NamespacedName{Namespace: dep.Namespace, Name: dep.Name}
		if w, ok := byDep[key]; ok {
			w.Pods = append(w.Pods, p.Name)
			continue
		}
		blocked := *dep.Spec.Replicas == 1
		if !blocked {
			if blocked, err = d.pdbBlocks(ctx, p); err != nil {
				return nil, err
			}
		}
		if !blocked {
			continue
		}
		byDep[key] = &state.SurgedWorkload{Namespace: dep.Namespace, Name: dep.Name, OriginalReplicas: *dep.Spec.Replicas, Pods: []string{p.Name}}
		order = append(order, key)
	}
	out := make([]state.SurgedWorkload, 0, len(order))
	for _, k := range order {
		out = append(out, *byDep[k])
	}
	return out, nil
}

func (d *Steps) setReplicas(ctx context.Context, ns, name string, n int32) error {
	deps := d.Client.AppsV1().Deployments(ns)
	scale, err := deps.GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("deployment %s/%s: get scale: %w", ns, name, err)
	}
	if scale.Spec.Replicas == n {
		return nil
	}
	scale.Spec.Replicas = n
	if _, err := deps.UpdateScale(ctx, name, scale, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("deployment %s/%s: scale to %d: %w", ns, name, n, err)
	}
	return nil
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

// Evict asks the Eviction API to remove every movable pod; a PDB refusal
// (429) leaves the pod for the next round. Evicted is set when no movable
// pod is left on the node.
func (d *Steps) Evict(ctx context.Context, s State) (State, error) {
	err := d.settle(ctx, func() (bool, error) {
		refused, err := d.evictRound(ctx, &s)
		// Refused pods wait for the state machine's next round; pods on
		// their way out are worth a short wait here.
		return len(s.Remaining) == refused, err
	})
	if err != nil {
		return s, err
	}
	s.Evicted = len(s.Remaining) == 0
	s.PastDeadline = !d.now().Before(s.Deadline)
	return s, nil
}

// evictRound asks for the eviction of every movable pod on the node and
// returns how many a PodDisruptionBudget refused.
func (d *Steps) evictRound(ctx context.Context, s *State) (refused int, err error) {
	pods, err := d.podsOn(ctx, s.Node)
	if err != nil {
		return 0, err
	}
	s.Remaining = s.Remaining[:0]
	for i := range pods {
		p := &pods[i]
		if !movable(p) {
			continue
		}
		if err := d.noteWorkload(ctx, s, p); err != nil {
			return 0, err
		}
		s.Remaining = append(s.Remaining, p.Namespace+"/"+p.Name)
		if p.DeletionTimestamp != nil {
			continue // on its way out
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		err := d.Client.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			refused++
			d.log().Info("eviction refused for now", "node", s.Node, "pod", p.Namespace+"/"+p.Name, "reason", err.Error())
		default:
			return 0, fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return refused, nil
}

func (d *Steps) noteWorkload(ctx context.Context, s *State, p *corev1.Pod) error {
	w, err := d.workloadOf(ctx, p)
	if err != nil || w == nil {
		return err
	}
	if !slices.Contains(s.Workloads, *w) {
		s.Workloads = append(s.Workloads, *w)
	}
	return nil
}

// ForceDelete deletes the movable pods still on the node at the deadline
// (policy force), PodDisruptionBudgets notwithstanding.
func (d *Steps) ForceDelete(ctx context.Context, s State) (State, error) {
	// A surge that never got its replacements Ready gives way too: the
	// Deployment goes back to its recorded count.
	if err := d.restoreSurged(ctx, s); err != nil {
		return s, err
	}
	pods, err := d.podsOn(ctx, s.Node)
	if err != nil {
		return s, err
	}
	for i := range pods {
		p := &pods[i]
		if !movable(p) || p.DeletionTimestamp != nil {
			continue
		}
		if err := d.noteWorkload(ctx, &s, p); err != nil {
			return s, err
		}
		err := d.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return s, fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		d.log().Warn("pod deleted at the drain deadline (policy force)", "node", s.Node, "pod", p.Namespace+"/"+p.Name)
	}
	s.Remaining, s.Evicted = nil, true
	return s, nil
}

// WaitReplacements sets Replaced once every workload whose pods left the
// node is back at its desired ready replicas.
func (d *Steps) WaitReplacements(ctx context.Context, s State) (State, error) {
	err := d.settle(ctx, func() (bool, error) {
		s.Replaced = true
		for _, w := range s.Workloads {
			ok, err := d.workloadReady(ctx, w)
			if err != nil || !ok {
				s.Replaced = false
				return false, err
			}
		}
		return true, nil
	})
	s.PastDeadline = !d.now().Before(s.Deadline)
	return s, err
}

func (d *Steps) workloadReady(ctx context.Context, w Workload) (bool, error) {
	var want, ready int32
	var err error
	switch w.Kind {
	case "Deployment":
		var o *appsv1.Deployment
		if o, err = d.Client.AppsV1().Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			want, ready = derefReplicas(o.Spec.Replicas), o.Status.ReadyReplicas
		}
	case "StatefulSet":
		var o *appsv1.StatefulSet
		if o, err = d.Client.AppsV1().StatefulSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			want, ready = derefReplicas(o.Spec.Replicas), o.Status.ReadyReplicas
		}
	case "ReplicaSet":
		var o *appsv1.ReplicaSet
		if o, err = d.Client.AppsV1().ReplicaSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{}); err == nil {
			want, ready = derefReplicas(o.Spec.Replicas), o.Status.ReadyReplicas
		}
	default:
		return true, nil
	}
	if apierrors.IsNotFound(err) {
		return true, nil // deleted meanwhile: nothing to wait for
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", w, err)
	}
	return ready >= want, nil
}

func derefReplicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// Terminate removes the machine through its provider, which lowers the
// group's target by one.
func (d *Steps) Terminate(ctx context.Context, s State) (State, error) {
	if s.Terminated {
		return s, nil
	}
	g, err := d.group(ctx, s.NodeGroup)
	if err != nil {
		return s, err
	}
	if s.BelowMin {
		// Prepare allowed going below nodetide's minimum: the provider's
		// own minimum is the one left to keep.
		g = providers.Own(g)
	}
	err = g.DeleteInstance(ctx, s.ProviderID)
	switch {
	case errors.Is(err, providers.ErrUnknownInstance):
		// Prepare found the machine in this group: a cloud that no longer
		// knows it has terminated it already (a retried Terminate).
		d.log().Info("machine already gone", "node", s.Node, "providerID", s.ProviderID)
	case err != nil:
		return s, fmt.Errorf("node group %s: terminate %s: %w", s.NodeGroup, s.ProviderID, err)
	}
	s.Terminated = true
	return s, nil
}

// RemoveNode deletes the Node object if it is still there (clusters without
// a cloud controller manager keep it).
func (d *Steps) RemoveNode(ctx context.Context, s State) (State, error) {
	err := d.Client.CoreV1().Nodes().Delete(ctx, s.Node, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return s, fmt.Errorf("delete node %s: %w", s.Node, err)
	}
	return s, nil
}

// Finish records success and frees the node's drain mark; a surge still
// raised is put back first.
func (d *Steps) Finish(ctx context.Context, s State) (State, error) {
	if err := d.restoreSurged(ctx, s); err != nil {
		return s, err
	}
	return s, d.Store.EndDrain(ctx, s.Node, s.DrainID, state.DrainSucceeded, "", d.now())
}

// restoreSurged puts every surged Deployment not yet restored back to its
// recorded count.
func (d *Steps) restoreSurged(ctx context.Context, s State) error {
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	if errors.Is(err, state.ErrNoDrain) {
		return nil
	}
	if err != nil {
		return err
	}
	changed := false
	for i := range rec.Surged {
		w := &rec.Surged[i]
		if w.Restored {
			continue
		}
		if err := d.setReplicas(ctx, w.Namespace, w.Name, w.OriginalReplicas); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		w.Restored, changed = true, true
	}
	if !changed {
		return nil
	}
	return d.Store.UpdateDrain(ctx, rec)
}

// Rollback undoes what the drain did: uncordon and untaint the node, put
// surged Deployments back to their recorded counts, clear the deletion cost
// of pods still there, and record the failure.
func (d *Steps) Rollback(ctx context.Context, s State) (State, error) {
	var errs []error
	if err := k8s.Uncordon(ctx, d.Client, s.Node, TaintKey); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	rec, err := d.Store.GetDrain(ctx, s.Node, s.DrainID)
	switch {
	case errors.Is(err, state.ErrNoDrain):
	case err != nil:
		errs = append(errs, err)
	default:
		for _, w := range rec.Surged {
			if err := d.setReplicas(ctx, w.Namespace, w.Name, w.OriginalReplicas); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			for _, pod := range w.Pods {
				if err := d.annotatePod(ctx, w.Namespace, pod, DeletionCostAnnotation, ""); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if len(errs) > 0 {
		return s, &StepError{Name: ErrNameTransient, Err: fmt.Errorf("rollback of drain %s: %w", s.DrainID, errors.Join(errs...))}
	}
	cause := "rolled back"
	if s.Error != nil {
		cause = s.Error.Error + ": " + s.Error.Cause
	}
	if err := d.Store.EndDrain(ctx, s.Node, s.DrainID, state.DrainRolledBack, cause, d.now()); err != nil {
		return s, err
	}
	d.log().Warn("drain rolled back", "node", s.Node, "drainId", s.DrainID, "cause", cause)
	return s, nil
}
