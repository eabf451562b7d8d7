package drain

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// restoreDecision is what taking a surge back does to a Deployment's
// replica count.
type restoreDecision struct {
	// Write: set the count to To (conditioned on the resourceVersion read).
	Write bool
	To    int32
	// Done: the drain's own earlier write already landed.
	Done bool
	// Left, when set, says why the count is left as found.
	Left string
}

// decideRestore decides a surge's undo from the count the surge wrote
// (wrote, delta over what it found), the count found now, and whether a
// write of the undo was recorded as about to happen (restoring). kubectl
// scale, an HPA and GitOps all set absolute counts: a count that is no
// longer the one the drain wrote is someone else's decision, and taking the
// delta off it would undo part of that decision, so it is left.
func decideRestore(wrote, delta, found int32, restoring bool) restoreDecision {
	back := max(wrote-delta, 0)
	switch {
	case found == wrote:
		return restoreDecision{Write: true, To: back}
	case restoring && found == back:
		return restoreDecision{Done: true}
	default:
		return restoreDecision{Left: fmt.Sprintf("replicas are %d, not the %d the drain's surge set: someone else (a person, an HPA or GitOps) changed them since, so they are left as they are", found, wrote)}
	}
}

// hpaFor names the HorizontalPodAutoscaler, among those of dep's
// namespace, that scales dep ("" if none; the target's API group is not
// compared, since leaving a Deployment unsurged is the safe mistake). Such a Deployment is not
// surged: the HPA owns its replica count, and would take a surge back on
// its next sync (at once when the surge passes maxReplicas, else as soon as
// its metrics say fewer), possibly removing the replacement rather than the
// pod being drained; raising the HPA's minReplicas instead would rewrite an
// object GitOps may own. Its pods are evicted like any other, under their
// PodDisruptionBudgets; minReplicas of 2 or more keeps one serving.
func hpaFor(dep *appsv1.Deployment, hpas []autoscalingv2.HorizontalPodAutoscaler) string {
	for _, h := range hpas {
		ref := h.Spec.ScaleTargetRef
		if h.Namespace == dep.Namespace && ref.Kind == "Deployment" && ref.Name == dep.Name {
			return h.Name
		}
	}
	return ""
}
