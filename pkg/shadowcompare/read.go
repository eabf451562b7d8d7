package shadowcompare

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

const (
	// DefaultStaleAfter: cluster-autoscaler writes its status every loop
	// (10 s by default); one unchanged this long is no running autoscaler's.
	DefaultStaleAfter = 5 * time.Minute
)

// The bounds of one read of Events: pages of eventPage, at most maxPages.
const (
	eventPage = 500
	maxPages  = 10
)

// Reader reads cluster-autoscaler's status ConfigMap and its scale-up and
// scale-down Events (a get of one ConfigMap, lists of Events by reason).
type Reader struct {
	Client          kubernetes.Interface
	Namespace, Name string
	// StaleAfter: a status older than this is a problem (0: never).
	StaleAfter time.Duration
}

// Read observes cluster-autoscaler in (since, now]. A failed read is a
// problem in the observations, never an error: the cycle's work is done.
func (r *Reader) Read(ctx context.Context, since, now time.Time) Observed {
	cm, cmErr := r.Client.CoreV1().ConfigMaps(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
	if cmErr != nil {
		cmErr = fmt.Errorf("get %s/%s: %w", r.Namespace, r.Name, cmErr)
	}
	var events []corev1.Event
	var problems []string
	for _, sel := range []fields.Set{
		{"reason": ReasonTriggeredScaleUp, "involvedObject.kind": "Pod"},
		{"reason": ReasonScaleDown, "involvedObject.kind": "Node"},
	} {
		got, err := r.list(ctx, sel.String())
		if err != nil {
			problems = append(problems, err.Error())
		}
		events = append(events, got...)
	}
	obs := Observe(cm, cmErr, events, since, now, r.StaleAfter)
	obs.Problems = append(obs.Problems, problems...)
	return obs
}

func (r *Reader) list(ctx context.Context, selector string) ([]corev1.Event, error) {
	var out []corev1.Event
	opts := metav1.ListOptions{FieldSelector: selector, Limit: eventPage}
	for range maxPages {
		list, err := r.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return out, fmt.Errorf("list Events %s: %w", selector, err)
		}
		out = append(out, list.Items...)
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
	return out, fmt.Errorf("list Events %s: more than %d, the comparison read only those", selector, eventPage*maxPages)
}
