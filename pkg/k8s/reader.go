package k8s

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nodetide/nodetide/pkg/snapshot"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Catch-up bounds. The API server's watch cache sends a bookmark with its
// current resource version two seconds before a watch's timeout (and roughly
// every minute otherwise), so a watch of watchSeconds brings the bookmark that
// proves a quiet resource caught up after about a second.
const (
	watchSeconds = 3
	// catchUpBudget bounds a resource's catch-up: a reader that falls further
	// behind lists the resource afresh.
	catchUpBudget = 15 * time.Second
	// watchAttempts bounds the watches of one catch-up (a watch that ends
	// early, e.g. on a cut connection, is resumed from the last event).
	watchAttempts = 4
)

// Reader keeps the cluster's nodes, pods, PodDisruptionBudgets and volume
// objects (claims, volumes, storage classes) between reads. The first Read
// lists them (as List does); later Reads catch up with the changes since,
// through a watch from the resource version the Reader is at, and list
// afresh only when that version is too old for the API server or the
// catch-up falls too far behind.
//
// Every Read returns, for each kind, the state at one resource version that
// reflects every change made before the Read began (a change made during the
// Read may or may not be included), or an error and no objects. The slices
// it returns are the Reader's own and are valid until the next Read: treat
// them as read-only. A Reader is not safe for concurrent use, and leaves no
// goroutine running between Reads.
type Reader struct {
	o     listOptions
	log   *slog.Logger
	nodes *cache[corev1.Node]
	pods  *cache[corev1.Pod]
	pdbs  *cache[policyv1.PodDisruptionBudget]
	// The volume kinds are few next to pods; they are kept the same way.
	claims  *cache[corev1.PersistentVolumeClaim]
	volumes *cache[corev1.PersistentVolume]
	classes *cache[storagev1.StorageClass]
	// budget and attempts are catchUpBudget and watchAttempts; tests shorten them.
	budget   time.Duration
	attempts int
}

// ReadStats says what the last Read did, per kind.
type ReadStats struct {
	// Listed names the kinds read by a full LIST; the others were caught up.
	Listed []string
	// Events counts the watch events applied.
	Events int
}

// NewReader returns a Reader that reads through client. log may be nil.
func NewReader(client kubernetes.Interface, log *slog.Logger, opts ...ListOption) *Reader {
	if log == nil {
		log = slog.Default()
	}
	return &Reader{
		o:        newListOptions(opts),
		log:      log,
		nodes:    newCache(nodeKind(client), client),
		pods:     newCache(podKind(client), client),
		pdbs:     newCache(pdbKind(client), client),
		claims:   newCache(claimKind(client), client),
		volumes:  newCache(volumeKind(client), client),
		classes:  newCache(storageClassKind(client), client),
		budget:   catchUpBudget,
		attempts: watchAttempts,
	}
}

// Read returns the cluster's objects (the kinds of Objects) as they are now
// (see Reader).
func (r *Reader) Read(ctx context.Context) (Objects, ReadStats, error) {
	var st ReadStats
	caches := []interface {
		catchUp(ctx context.Context, r *Reader) (int, error)
		list(ctx context.Context, r *Reader) error
		valid() bool
		reset()
		name() string
	}{r.nodes, r.pods, r.pdbs, r.claims, r.volumes, r.classes}
	const volumeKinds = 3 // caches[volumeKinds:] are the volume kinds

	// Catch the kinds up at once, each in its own goroutine: they mostly wait
	// for the server's bookmark. All have ended when Read goes on.
	var wg sync.WaitGroup
	errs := make([]error, len(caches))
	events := make([]int, len(caches))
	for i, c := range caches {
		if !c.valid() {
			continue
		}
		wg.Go(func() { events[i], errs[i] = c.catchUp(ctx, r) })
	}
	wg.Wait()
	for i, c := range caches {
		st.Events += events[i]
		if errs[i] != nil {
			if ctx.Err() != nil {
				return Objects{}, st, fmt.Errorf("catch up %s: %w", c.name(), errs[i])
			}
			r.log.Info("catch-up failed; listing afresh", "resource", c.name(), "error", errs[i].Error())
			c.reset()
		}
	}
	// Kinds never read, or whose catch-up failed, are listed, one at a time
	// to bound memory.
	var skipped error
	for i, c := range caches {
		if c.valid() {
			continue
		}
		err := c.list(ctx, r)
		if i >= volumeKinds && err != nil && volumeKindRefused(err) {
			// None of the volume kinds, or a claim would look missing;
			// the next Read asks again.
			skipped = err
			for _, v := range caches[volumeKinds:] {
				v.reset()
			}
			break
		}
		if err != nil {
			return Objects{}, st, err
		}
		st.Listed = append(st.Listed, c.name())
	}
	objs := Objects{Nodes: r.nodes.items, Pods: r.pods.items, PodDisruptionBudgets: r.pdbs.items}
	if skipped != nil {
		r.log.Warn("volume objects not read: volume topology is ignored", "error", skipped.Error())
		objs.VolumesSkipped = skipped.Error()
		st.Listed = slices.DeleteFunc(st.Listed, func(name string) bool {
			return name == r.claims.name() || name == r.volumes.name() || name == r.classes.name()
		})
	} else {
		objs.PersistentVolumeClaims, objs.PersistentVolumes, objs.StorageClasses = r.claims.items, r.volumes.items, r.classes.items
	}
	return objs, st, nil
}

// cache is the kept state of one kind at resource version rv: its objects in
// key order, and where each is.
type cache[T any] struct {
	k      *kind[T]
	client kubernetes.Interface
	items  []T
	index  map[objKey]int
	rv     string // "" until listed
	// trim is kept with the objects: a catch-up shares the interned strings
	// and pod shapes of the list it continues. Nil keeps objects whole.
	trim *snapshot.Trimmer
}

func newCache[T any](k *kind[T], client kubernetes.Interface) *cache[T] {
	return &cache[T]{k: k, client: client}
}

func (c *cache[T]) name() string { return c.k.resource }
func (c *cache[T]) valid() bool  { return c.rv != "" }

// reset drops the kept objects, so the next read lists them afresh.
func (c *cache[T]) reset() {
	c.items, c.index, c.rv, c.trim = nil, nil, "", nil
}

func (c *cache[T]) list(ctx context.Context, r *Reader) error {
	c.reset()
	t := r.o.trimmer()
	items, rv, err := listAll(ctx, r.o.pageSize, c.k, t)
	if err != nil {
		return err
	}
	c.items, c.index, c.trim = items, sortByKey(items, c.k.key), t
	// A resource version that is not an integer (or none) cannot tell a
	// catch-up when it is done: the cache stays invalid and every read lists.
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err == nil {
		c.rv = rv
	}
	return nil
}

// sortByKey puts items in key order, keeping the order of equal keys, and
// returns where each key is. The API server lists in key order, so sorting
// is a safeguard: it compares the keys, read once, never the objects, which
// a comparison by value would copy (and, through key, move to the heap)
// twice per comparison.
func sortByKey[T any](items []T, key func(*T) objKey) map[objKey]int {
	keys := make([]objKey, len(items))
	sorted := true
	for i := range items {
		keys[i] = key(&items[i])
		sorted = sorted && (i == 0 || compareKeys(keys[i-1], keys[i]) <= 0)
	}
	if !sorted {
		order := make([]int, len(items))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return compareKeys(keys[a], keys[b]) })
		permute(items, keys, order)
	}
	index := make(map[objKey]int, len(items))
	for i := range keys {
		index[keys[i]] = i
	}
	return index
}

// permute moves items[order[i]] (and its key) to i in place, one cycle of
// the permutation at a time, so no second slice of objects is made. order
// is used up.
func permute[T any](items []T, keys []objKey, order []int) {
	for i := range order {
		if order[i] < 0 {
			continue
		}
		item, k := items[i], keys[i]
		j := i
		for order[j] != i {
			next := order[j]
			items[j], keys[j] = items[next], keys[next]
			order[j] = -1
			j = next
		}
		items[j], keys[j] = item, k
		order[j] = -1
	}
}

// errExpired is a watch that starts from a resource version the server no
// longer keeps (410 Gone / too old resource version).
var errExpired = errors.New("resource version too old")

// catchUp applies the changes since c.rv, up to the resource version the
// server is at when it starts, and returns how many events it applied. What
// it applied is kept even when it fails: the cache is then consistent at an
// older resource version.
func (c *cache[T]) catchUp(ctx context.Context, r *Reader) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.budget)
	defer cancel()
	target, err := c.current(ctx)
	if err != nil {
		return 0, err
	}
	changes := map[objKey]*T{}
	defer func() { c.apply(changes) }()
	applied := 0
	for attempt := 1; ; attempt++ {
		done, err := reached(c.rv, target)
		if err != nil || done {
			return applied, err
		}
		if attempt > r.attempts {
			return applied, fmt.Errorf("still at resource version %s after %d watches, behind %s", c.rv, r.attempts, target)
		}
		n, err := c.watchTo(ctx, target, changes)
		applied += n
		switch {
		case errors.Is(err, errExpired):
			return applied, err
		case ctx.Err() != nil:
			return applied, fmt.Errorf("at resource version %s, behind %s: %w", c.rv, target, ctx.Err())
		case err != nil:
			r.log.Info("watch ended early; resuming", "resource", c.name(), "resourceVersion", c.rv, "error", err.Error())
		}
	}
}

// current is the resource version the server's list of the kind is at: a
// consistent read of one object, which also brings the server's watch cache
// of the kind up to that version.
func (c *cache[T]) current(ctx context.Context) (string, error) {
	_, lm, err := c.k.list(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return "", fmt.Errorf("current resource version: %w", err)
	}
	return lm.ResourceVersion, nil
}

func reached(rv, target string) (bool, error) {
	cmp, err := resourceversion.CompareResourceVersion(rv, target)
	if err != nil {
		return false, fmt.Errorf("compare resource versions: %w", err)
	}
	return cmp >= 0, nil
}

// watchTo watches from c.rv and records the changes until an event or
// bookmark at or past target. It returns the events it applied.
func (c *cache[T]) watchTo(ctx context.Context, target string, changes map[objKey]*T) (int, error) {
	secs := int64(watchSeconds)
	w, err := c.k.watch(ctx, metav1.ListOptions{
		ResourceVersion: c.rv, AllowWatchBookmarks: true, TimeoutSeconds: &secs,
	})
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return 0, fmt.Errorf("%w: %w", errExpired, err)
		}
		return 0, fmt.Errorf("watch: %w", err)
	}
	defer w.Stop()
	n := 0
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return n, errors.New("watch closed before reaching the current resource version")
		}
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return n, fmt.Errorf("%w: %w", errExpired, err)
			}
			return n, fmt.Errorf("watch: %w", err)
		}
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			return n, fmt.Errorf("watch: %s event: %w", ev.Type, err)
		}
		rv := m.GetResourceVersion()
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			obj, isT := any(ev.Object).(*T)
			if !isT {
				return n, fmt.Errorf("watch: unexpected %T in a %s event", ev.Object, ev.Type)
			}
			key := c.k.key(obj)
			if ev.Type == watch.Deleted {
				changes[key] = nil
			} else {
				kept := c.k.keep(c.trim, obj)
				changes[key] = &kept
			}
			n++
		case watch.Bookmark:
		default:
			return n, fmt.Errorf("watch: unexpected event type %q", ev.Type)
		}
		if rv != "" {
			c.rv = rv
		}
		if done, err := reached(c.rv, target); err != nil || done {
			return n, err
		}
	}
}

// apply merges changes (nil: deleted) into the kept objects, keeping them in
// key order: updates in place, deletions compacted, additions merged from
// the back, so the slice is reused whatever its size.
func (c *cache[T]) apply(changes map[objKey]*T) {
	var added []objKey
	var gone []int
	for k, v := range changes {
		i, ok := c.index[k]
		switch {
		case ok && v != nil:
			c.items[i] = *v
		case ok:
			gone = append(gone, i)
			delete(c.index, k)
		case v != nil:
			added = append(added, k)
		}
	}
	if len(added) == 0 && len(gone) == 0 {
		return
	}
	var zero T
	if len(gone) > 0 {
		slices.Sort(gone)
		w, g := gone[0], 0
		for i := gone[0]; i < len(c.items); i++ {
			if g < len(gone) && gone[g] == i {
				g++
				continue
			}
			c.items[w] = c.items[i]
			w++
		}
		for i := w; i < len(c.items); i++ {
			c.items[i] = zero // let the removed objects go
		}
		c.items = c.items[:w]
	}
	if len(added) > 0 {
		slices.SortFunc(added, compareKeys)
		n := len(c.items)
		c.items = slices.Grow(c.items, len(added))[:n+len(added)]
		i, j := n-1, len(added)-1
		for w := len(c.items) - 1; j >= 0; w-- {
			if i >= 0 && compareKeys(c.k.key(&c.items[i]), added[j]) > 0 {
				c.items[w] = c.items[i]
				i--
			} else {
				c.items[w] = *changes[added[j]]
				j--
			}
		}
	}
	clear(c.index)
	for i := range c.items {
		c.index[c.k.key(&c.items[i])] = i
	}
}
