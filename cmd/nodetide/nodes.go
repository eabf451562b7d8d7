package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodetide/nodetide/pkg/drain"
	"github.com/nodetide/nodetide/pkg/k8s"
	"github.com/nodetide/nodetide/pkg/setup"
)

// nodeRow is one node in `nodetide nodes` (scalerctl's "get nodes").
type nodeRow struct {
	Name              string   `json:"name"`
	NodeGroup         string   `json:"nodeGroup"`
	Ready             bool     `json:"ready"`
	Schedulable       bool     `json:"schedulable"`
	Draining          bool     `json:"draining"`
	CPU               string   `json:"cpu"`
	Memory            string   `json:"memory"`
	MaxPods           int64    `json:"maxPods"`
	Pods              int      `json:"pods"`
	CPURequested      string   `json:"cpuRequested"`
	MemoryRequested   string   `json:"memoryRequested"`
	CPUUtilization    float64  `json:"cpuUtilization"`
	MemoryUtilization float64  `json:"memoryUtilization"`
	PodNames          []string `json:"podNames"`
}

type nodesDoc struct {
	Nodes  []nodeRow `json:"nodes"`
	Totals struct {
		Nodes   int    `json:"nodes"`
		CPU     string `json:"cpu"`
		Memory  string `json:"memory"`
		MaxPods int64  `json:"maxPods"`
		Pods    int    `json:"pods"`
	} `json:"totals"`
}

func newNodesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "Per node CPU, memory, pods, utilisation, group, schedulable and draining, with cluster totals",
		Example: `  nodetide nodes --config nodetide.yaml
  nodetide nodes --config nodetide.yaml -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			ev, err := setup.Evaluator(ctx, cfg, g.kubeconfig, &setup.AWS{}, g.logger(), "cli")
			if err != nil {
				return err
			}
			objs, err := k8s.List(ctx, ev.Client)
			if err != nil {
				return err
			}
			groups, err := ev.Groups(ctx)
			if err != nil {
				return err
			}
			groupOf := map[string]string{}
			for _, grp := range groups {
				insts, err := grp.Instances(ctx)
				if err != nil {
					return err
				}
				for _, in := range insts {
					groupOf[in.ProviderID] = grp.Name()
				}
			}
			doc := buildNodes(objs.Nodes, objs.Pods, groupOf)
			if g.output != "table" {
				return g.printDoc(doc)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tGROUP\tREADY\tSCHEDULABLE\tDRAINING\tCPU\tMEMORY\tPODS\tCPU%\tMEM%")
			for _, r := range doc.Nodes {
				fmt.Fprintf(tw, "%s\t%s\t%t\t%t\t%t\t%s/%s\t%s/%s\t%d/%d\t%.0f%%\t%.0f%%\n", r.Name, orNone(r.NodeGroup), r.Ready, r.Schedulable, r.Draining,
					r.CPURequested, r.CPU, r.MemoryRequested, r.Memory, r.Pods, r.MaxPods, 100*r.CPUUtilization, 100*r.MemoryUtilization)
			}
			t := doc.Totals
			fmt.Fprintf(tw, "TOTAL\t%d nodes\t\t\t\t%s\t%s\t%d/%d\t\t\n", t.Nodes, t.CPU, t.Memory, t.Pods, t.MaxPods)
			return tw.Flush()
		},
	}
	addOutputFlag(cmd, g, "table", "table", "json", "yaml")
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func buildNodes(nodes []corev1.Node, pods []corev1.Pod, groupOf map[string]string) nodesDoc {
	var doc nodesDoc
	doc.Nodes = []nodeRow{}
	byNode := map[string][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	var totCPU, totMem resource.Quantity
	for _, n := range nodes {
		alloc := n.Status.Allocatable
		var cpuReq, memReq resource.Quantity
		row := nodeRow{Name: n.Name, NodeGroup: groupOf[n.Spec.ProviderID], Schedulable: !n.Spec.Unschedulable, PodNames: []string{}}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				row.Ready = c.Status == corev1.ConditionTrue
			}
		}
		for _, t := range n.Spec.Taints {
			if t.Key == drain.TaintKey {
				row.Draining = true
			}
		}
		for _, p := range byNode[n.Name] {
			req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
			cpuReq.Add(req[corev1.ResourceCPU])
			memReq.Add(req[corev1.ResourceMemory])
			row.PodNames = append(row.PodNames, p.Namespace+"/"+p.Name)
		}
		row.Pods = len(byNode[n.Name])
		row.CPU, row.Memory, row.MaxPods = alloc.Cpu().String(), alloc.Memory().String(), alloc.Pods().Value()
		row.CPURequested, row.MemoryRequested = cpuReq.String(), memReq.String()
		if c := alloc.Cpu().MilliValue(); c > 0 {
			row.CPUUtilization = float64(cpuReq.MilliValue()) / float64(c)
		}
		if m := alloc.Memory().Value(); m > 0 {
			row.MemoryUtilization = float64(memReq.Value()) / float64(m)
		}
		totCPU.Add(*alloc.Cpu())
		totMem.Add(*alloc.Memory())
		doc.Totals.MaxPods += row.MaxPods
		doc.Totals.Pods += row.Pods
		doc.Nodes = append(doc.Nodes, row)
	}
	doc.Totals.Nodes = len(nodes)
	doc.Totals.CPU, doc.Totals.Memory = totCPU.String(), totMem.String()
	return doc
}
