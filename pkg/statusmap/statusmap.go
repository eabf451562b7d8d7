// Package statusmap keeps the status ConfigMap: the last evaluate cycle's
// status where `kubectl get configmap` finds it, as cluster-autoscaler keeps
// cluster-autoscaler-status. Its `status` key is the text `nodetide status`
// prints (times as of the cycle), `status.json` the status document.
package statusmap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodetide/nodetide/pkg/evaluate"
	"github.com/nodetide/nodetide/pkg/state"
	"github.com/nodetide/nodetide/pkg/statustable"
)

// Keys, labels and annotations of the ConfigMap.
const (
	KeyText             = "status"
	KeyJSON             = "status.json"
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	ManagedBy           = "nodetide"
	AnnotationCluster   = "nodetide.io/cluster"
	AnnotationWrittenAt = "nodetide.io/written-at"
	// AnnotationDigest fingerprints the status without its per-cycle times,
	// so a cold start knows whether anything changed without decoding.
	AnnotationDigest = "nodetide.io/status-digest"
)

// MaxData bounds the ConfigMap's data, far under the API's 1 MiB. The
// status document gets up to MaxJSON (the state table's own bound): longer,
// its longest lists are halved until it fits, their *Omitted counts saying
// how many entries were left out. The text gets what is left, cut at a line
// with CutMarker.
const (
	MaxData = 768 * 1024
	MaxJSON = state.MaxStatusSize
)

// CutMarker ends a text that was cut to fit.
const CutMarker = "... the status text was cut here to fit the ConfigMap; status.json holds the rest\n"

// DefaultRefresh is how often a status whose only change is its times is
// written anyway, so the written-at annotation shows a reader how fresh it
// is without an update every cycle.
const DefaultRefresh = 5 * time.Minute

// Writer writes the status ConfigMap when the status changed. It keeps the
// ConfigMap it last wrote: a warm cycle whose status did not change makes no
// API call, a changed one one update; a cold one reads it once first.
type Writer struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	Cluster   string
	Log       *slog.Logger
	// Refresh: see DefaultRefresh; 0 means DefaultRefresh.
	Refresh time.Duration
	Now     func() time.Time

	cm      *corev1.ConfigMap // as last read or written; nil: read it first
	refused string            // the last refusal, logged once
}

// Write stores st in the ConfigMap if it changed since the last write, or
// only its times did and Refresh has passed. A refused write is returned
// (the caller reports it) and logged only when it differs from the last.
func (w *Writer) Write(ctx context.Context, st evaluate.Status) error {
	err := w.write(ctx, st)
	if err != nil {
		w.cm = nil // read it again next time
		err = fmt.Errorf("status ConfigMap %s/%s not written: %w", w.Namespace, w.Name, err)
		if msg := err.Error(); msg != w.refused {
			w.refused = msg
			w.log().Warn("status ConfigMap", "error", msg)
		}
		return err
	}
	if w.refused != "" {
		w.refused = ""
		w.log().Info("status ConfigMap written again", "namespace", w.Namespace, "name", w.Name)
	}
	return nil
}

func (w *Writer) write(ctx context.Context, st evaluate.Status) error {
	digest, err := Digest(st)
	if err != nil {
		return err
	}
	now := w.now()
	cms := w.Client.CoreV1().ConfigMaps(w.Namespace)
	if w.cm == nil {
		cm, err := cms.Get(ctx, w.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cm = nil
		case err != nil:
			return fmt.Errorf("read: %w", err)
		}
		w.cm = cm
	}
	if w.cm != nil && !w.due(digest, now) {
		return nil
	}
	data, err := Data(w.Cluster, st)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		next, err := w.put(ctx, digest, now, data)
		if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt == 0 {
			// Someone else changed it: read it again and write over it
			// (it is this deployment's, by name).
			if w.cm, err = cms.Get(ctx, w.Name, metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("read after a conflict: %w", err)
			}
			if apierrors.IsNotFound(err) {
				w.cm = nil
			}
			continue
		}
		if err != nil {
			return err
		}
		w.cm = next
		return nil
	}
}

// due reports whether the stored ConfigMap needs this status: it changed, or
// only its times did and the last write is older than Refresh.
func (w *Writer) due(digest string, now time.Time) bool {
	if w.cm.Annotations[AnnotationDigest] != digest {
		return true
	}
	at, err := time.Parse(time.RFC3339Nano, w.cm.Annotations[AnnotationWrittenAt])
	refresh := w.Refresh
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	return err != nil || now.Sub(at) >= refresh
}

// put creates or updates (with the resourceVersion last seen) the ConfigMap.
func (w *Writer) put(ctx context.Context, digest string, now time.Time, data map[string]string) (*corev1.ConfigMap, error) {
	cms := w.Client.CoreV1().ConfigMaps(w.Namespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace}}
	if w.cm != nil {
		cm = w.cm.DeepCopy()
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Labels[LabelManagedBy] = ManagedBy
	cm.Annotations[AnnotationCluster] = w.Cluster
	cm.Annotations[AnnotationWrittenAt] = now.UTC().Format(time.RFC3339Nano)
	cm.Annotations[AnnotationDigest] = digest
	cm.Data = data
	if w.cm == nil {
		out, err := w.Client.CoreV1().ConfigMaps(w.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			// evaluate's Role has no create: the manifest makes it.
			return nil, fmt.Errorf("create (kubectl apply -f deploy/rbac.yaml makes it): %w", err)
		}
		if err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		return out, nil
	}
	out, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update: %w", err)
	}
	return out, nil
}

// Digest fingerprints st without the times every cycle changes (its time,
// duration, and when it read the groups).
func Digest(st evaluate.Status) (string, error) {
	st.CycleAt, st.Duration, st.GroupsAt = time.Time{}, "", time.Time{}
	doc, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("status: %w", err)
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:16]), nil
}

// Data is the ConfigMap's data for st: the status document, and the text
// `nodetide status` prints with times as of the cycle, both fitted to MaxData.
func Data(cluster string, st evaluate.Status) (map[string]string, error) {
	doc, err := fitJSON(&st)
	if err != nil {
		return nil, err
	}
	var text bytes.Buffer
	if err := statustable.Write(&text, Text(cluster, st), st.CycleAt); err != nil {
		return nil, fmt.Errorf("status text: %w", err)
	}
	return map[string]string{KeyJSON: string(doc), KeyText: cut(text.String(), MaxData-len(doc)-len(KeyJSON)-len(KeyText))}, nil
}

// fitJSON marshals st, halving its longest list (by bytes) until the
// document fits MaxJSON; the lists' *Omitted counts grow by what was cut.
func fitJSON(st *evaluate.Status) ([]byte, error) {
	for {
		doc, err := json.Marshal(st)
		if err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		if len(doc) <= MaxJSON {
			return doc, nil
		}
		if !halveLongest(st) {
			return nil, fmt.Errorf("status: %d bytes with every list cut, over %d", len(doc), MaxJSON)
		}
	}
}

// halveLongest halves the status list that takes the most bytes; false when
// every list is empty.
func halveLongest(st *evaluate.Status) bool {
	type list struct {
		size    int
		n       int
		halve   func(keep int)
		omitted *int
	}
	sizeOf := func(v any) int { b, _ := json.Marshal(v); return len(b) }
	lists := []list{
		{sizeOf(st.NodeGroups), len(st.NodeGroups), func(k int) { st.NodeGroups = st.NodeGroups[:k] }, &st.NodeGroupsOmitted},
		{sizeOf(st.Unneeded), len(st.Unneeded), func(k int) { st.Unneeded = st.Unneeded[:k] }, &st.UnneededOmitted},
		{sizeOf(st.Drains), len(st.Drains), func(k int) { st.Drains = st.Drains[:k] }, &st.DrainsOmitted},
		{sizeOf(st.Actions), len(st.Actions), func(k int) { st.Actions = st.Actions[:k] }, &st.ActionsOmitted},
		{sizeOf(st.Kept), len(st.Kept), func(k int) { st.Kept = st.Kept[:k] }, &st.KeptOmitted},
		{sizeOf(st.Replacing), len(st.Replacing), func(k int) { st.Replacing = st.Replacing[:k] }, &st.ReplacingOmitted},
		{sizeOf(st.ReplaceNotTaken), len(st.ReplaceNotTaken), func(k int) { st.ReplaceNotTaken = st.ReplaceNotTaken[:k] }, &st.ReplaceNotTakenOmitted},
	}
	if c := st.ShadowCompare; c != nil {
		// A copy: the caller's status shares the comparison.
		cp := *c
		st.ShadowCompare = &cp
		lists = append(lists, list{sizeOf(cp.Groups), len(cp.Groups), func(k int) { cp.Groups = cp.Groups[:k] }, &cp.GroupsOmitted})
	}
	best := -1
	for i, l := range lists {
		if l.n > 0 && (best < 0 || l.size > lists[best].size) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	l := lists[best]
	keep := l.n / 2
	l.halve(keep)
	*l.omitted += l.n - keep
	return true
}

// Text is the document the ConfigMap's text shows: the status as the cycle
// wrote it, its drains those the cycle read.
func Text(cluster string, st evaluate.Status) statustable.Doc {
	return statustable.Doc{Cluster: cluster, Status: st, DrainsReadAt: st.CycleAt}
}

// cut bounds s to limit bytes, cutting at a line and ending with CutMarker.
func cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	keep := max(0, limit-len(CutMarker))
	if i := strings.LastIndexByte(s[:keep], '\n'); i >= 0 {
		keep = i + 1
	} else {
		keep = 0
	}
	return s[:keep] + CutMarker
}

// ErrNotFound is a ConfigMap that is not there.
var ErrNotFound = errors.New("status ConfigMap not found")

// Stored is a status read from the ConfigMap.
type Stored struct {
	Status    evaluate.Status
	Cluster   string
	WrittenAt time.Time
}

// Read reads the status from the ConfigMap namespace/name.
func Read(ctx context.Context, client kubernetes.Interface, namespace, name string) (Stored, error) {
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Stored{}, fmt.Errorf("%s/%s: %w", namespace, name, ErrNotFound)
	}
	if err != nil {
		return Stored{}, fmt.Errorf("status ConfigMap %s/%s: %w", namespace, name, err)
	}
	doc, ok := cm.Data[KeyJSON]
	if !ok {
		return Stored{}, fmt.Errorf("status ConfigMap %s/%s has no %s yet: %w", namespace, name, KeyJSON, ErrNotFound)
	}
	var out Stored
	if err := json.Unmarshal([]byte(doc), &out.Status); err != nil {
		return Stored{}, fmt.Errorf("status ConfigMap %s/%s: %s: %w", namespace, name, KeyJSON, err)
	}
	out.Cluster = cm.Annotations[AnnotationCluster]
	out.WrittenAt, _ = time.Parse(time.RFC3339Nano, cm.Annotations[AnnotationWrittenAt])
	return out, nil
}

func (w *Writer) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Writer) log() *slog.Logger {
	if w.Log != nil {
		return w.Log
	}
	return slog.Default()
}
