package planner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetide/nodetide/pkg/snapshot"
)

// priced gives g a price per node-hour from the config.
func priced(g snapshot.NodeGroup, perHour float64, currency string) snapshot.NodeGroup {
	g.Price = &snapshot.Price{PerHour: perHour, Currency: currency, Source: snapshot.PriceConfig}
	return g
}

// expanders sets the chain and the priorities.
func expanders(priorities map[string]int, names ...string) func(*Settings) {
	return func(s *Settings) {
		s.ScaleUp.Expanders = names
		s.ScaleUp.Priorities = priorities
	}
}

// reason checks the first scale-up's reason.
func reason(want string) func(t *testing.T, p Plan) {
	return func(t *testing.T, p Plan) {
		t.Helper()
		if len(p.ScaleUp) == 0 {
			t.Fatal("no scale-up")
		}
		if got := p.ScaleUp[0].Reason; got != want {
			t.Errorf("reason\n %q\nwant\n %q", got, want)
		}
	}
}

// TestPriceExpander: the price expander takes the group whose new nodes
// cost least per pod they take; ties go to the next expander, least-waste
// last; unpriced groups lose to priced ones; currencies are not compared.
func TestPriceExpander(t *testing.T) {
	small := group("small", 0, 5, 0, "4", "4Gi")   // the snug one: waste 25%
	large := group("large", 0, 5, 0, "16", "64Gi") // waste 88%
	medium := group("medium", 0, 5, 0, "8", "8Gi") // waste 62%
	p := []corev1.Pod{pod("p", "3", "3Gi", pending())}
	runCases(t, []planCase{
		{
			name: "no expander listed is least-waste",
			snap: clusterOf([]snapshot.NodeGroup{priced(large, 0.1, "USD"), priced(small, 0.2, "USD")}, nil, p),
			set:  expanders(nil),
			want: want{up: []string{"small +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (least waste 25%)")},
		},
		{
			name: "the cheapest wins over less waste",
			snap: clusterOf([]snapshot.NodeGroup{priced(large, 0.1, "USD"), priced(small, 0.2, "USD")}, nil, p),
			set:  expanders(nil, ExpanderPrice),
			want: want{up: []string{"large +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (price $0.1/h for 1 node, waste 88%)")},
		},
		{
			name: "equal prices go to least waste",
			snap: clusterOf([]snapshot.NodeGroup{priced(large, 0.1, "USD"), priced(small, 0.1, "USD")}, nil, p),
			set:  expanders(nil, ExpanderPrice),
			want: want{up: []string{"small +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (price $0.1/h for 1 node, waste 25%)")},
		},
		{
			name: "priority, then price among the top priority",
			snap: clusterOf([]snapshot.NodeGroup{priced(large, 0.3, "USD"), priced(small, 0.2, "USD"), priced(medium, 0.05, "USD")}, nil, p),
			set:  expanders(map[string]int{"large": 10, "small": 10, "medium": 1}, ExpanderPriority, ExpanderPrice),
			want: want{up: []string{"small +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (priority 10, price $0.2/h for 1 node, waste 25%; " +
				"cheaper group medium ($0.05/h for 1 node) not taken: lower priority (1 against 10))")},
		},
		{
			name: "price, then priority among the cheapest",
			snap: clusterOf([]snapshot.NodeGroup{priced(large, 0.1, "USD"), priced(small, 0.1, "USD"), priced(medium, 0.3, "USD")}, nil, p),
			set:  expanders(map[string]int{"large": 5, "small": 1, "medium": 10}, ExpanderPrice, ExpanderPriority),
			want: want{up: []string{"large +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (price $0.1/h for 1 node, priority 5, waste 88%)")},
		},
		{
			name: "least waste first, price breaks its ties",
			snap: clusterOf([]snapshot.NodeGroup{priced(group("a", 0, 5, 0, "4", "4Gi"), 0.2, "USD"), priced(group("b", 0, 5, 0, "4", "4Gi"), 0.1, "USD"), priced(large, 0.01, "USD")}, nil, p),
			set:  expanders(nil, ExpanderLeastWaste, ExpanderPrice),
			want: want{up: []string{"b +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (least waste 25%, price $0.1/h for 1 node; " +
				"cheaper group large ($0.01/h for 1 node) not taken: more waste (88% against 25%))")},
		},
		{
			name: "a group without a price loses to a priced one",
			snap: clusterOf([]snapshot.NodeGroup{priced(large, 0.5, "USD"), small}, nil, p),
			set:  expanders(nil, ExpanderPrice),
			want: want{up: []string{"large +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (price $0.5/h for 1 node, waste 88%; no price: small (priced groups go first))")},
		},
		{
			name: "without any price the next expander decides",
			snap: clusterOf([]snapshot.NodeGroup{large, small}, nil, p),
			set:  expanders(nil, ExpanderPrice),
			want: want{up: []string{"small +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (no price, waste 25%)")},
		},
		{
			name: "a top priority group without a price: the priced one is named",
			snap: clusterOf([]snapshot.NodeGroup{priced(large, 0.1, "USD"), small}, nil, p),
			set:  expanders(map[string]int{"small": 10, "large": 1}, ExpanderPriority, ExpanderPrice),
			want: want{up: []string{"small +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (priority 10, no price, waste 25%; " +
				"priced group large ($0.1/h for 1 node) not taken: lower priority (1 against 10))")},
		},
		{
			name: "prices in different currencies are not compared",
			snap: clusterOf([]snapshot.NodeGroup{priced(large, 0.05, "USD"), priced(small, 0.1, "EUR"), priced(medium, 0.2, "EUR")}, nil, p),
			set:  expanders(nil, ExpanderPrice),
			want: want{up: []string{"small +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (price €0.1/h for 1 node, waste 25%; prices in EUR and USD not compared)")},
		},
		{
			name: "a currency without a sign is written by its code",
			snap: clusterOf([]snapshot.NodeGroup{priced(small, 0.25, "CHF")}, nil, p),
			set:  expanders(nil, ExpanderPrice),
			want: want{up: []string{"small +1 =1 [default/p]"}, check: reason("1 pending pod needs 1 node (price 0.25 CHF/h for 1 node, waste 25%)")},
		},
		{
			// a costs less in all but hosts only two of the pods: per pod
			// it is dearer, so it is not taken for doing less.
			name: "cost is compared per pod placed",
			snap: clusterOf([]snapshot.NodeGroup{priced(group("a", 0, 1, 0, "2", "8Gi"), 0.1, "USD"), priced(group("b", 0, 1, 0, "16", "64Gi"), 0.12, "USD")}, nil,
				[]corev1.Pod{pod("p1", "1", "1Gi", pending()), pod("p2", "1", "1Gi", pending()), pod("p3", "1", "1Gi", pending())}),
			set:  expanders(nil, ExpanderPrice),
			want: want{up: []string{"b +1 =1 [default/p1 default/p2 default/p3]"}, check: reason("3 pending pods need 1 node (price $0.12/h for 1 node, waste 88%)")},
		},
		{
			name: "the price counts every node needed",
			snap: clusterOf([]snapshot.NodeGroup{priced(small, 0.096, "USD"), priced(large, 0.5, "USD")}, nil,
				[]corev1.Pod{pod("p1", "3", "3Gi", pending()), pod("p2", "3", "3Gi", pending())}),
			set:  expanders(nil, ExpanderPrice),
			want: want{up: []string{"small +2 =2 [default/p1 default/p2]"}, check: reason("2 pending pods need 2 nodes (price $0.192/h for 2 nodes, waste 25%)")},
		},
	})
}
