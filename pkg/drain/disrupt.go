package drain

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodetide/nodetide/pkg/planner"
)

// maxBlockersNamed caps the blockers a refusal lists, so the error stays
// readable; the rest are counted.
const maxBlockersNamed = 5

// checkDisruptable refuses, before anything changes, a node that must not
// be disrupted by the scale-down rules (planner.DisruptionBlockers): a pod
// that would be lost or that asks to stay, or the node's own opt-out. It is
// checked on every drain, since a pod may have landed after the plan chose
// the node. A PodDisruptionBudget that allows no disruption now is not a
// refusal: the drain surges or waits for it. With force the drain goes on,
// and says what it overrides.
func (d *Steps) checkDisruptable(ctx context.Context, node *corev1.Node, s State) error {
	pods, err := d.podsOn(ctx, node.Name)
	if err != nil {
		return err
	}
	pdbs, err := d.Client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	blockers := planner.DisruptionBlockers(node, pods, pdbs.Items)
	if len(blockers) == 0 {
		return nil
	}
	named := describeBlockers(blockers)
	if s.Force {
		d.log().Warn("drain forced over what must not be disrupted", "node", s.Node, "drainId", s.DrainID, "overrides", named)
		return nil
	}
	if s.Interruption.Terminal() {
		// The cloud takes the machine whatever the drain does: moving the
		// pods first is all that is left to decide.
		d.log().Warn("machine interrupted by the cloud: drained over what must not be disrupted", "node", s.Node, "drainId", s.DrainID, "interruption", s.Interruption.Kind, "overrides", named)
		return nil
	}
	return stepErr(ErrNameNotDisruptable, "node %s must not be disrupted: %s; nothing was changed (a request with \"force\": true drains it anyway)", s.Node, named)
}

func describeBlockers(bs []planner.Blocker) string {
	parts := make([]string, 0, min(len(bs), maxBlockersNamed)+1)
	for i, b := range bs {
		if i == maxBlockersNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(bs)-i))
			break
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, "; ")
}
