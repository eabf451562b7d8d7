package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/nodetide/nodetide/pkg/buildinfo"
)

func newVersionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "This build of nodetide: version, commit, commit date, Go version and platform (devel for a build make release did not stamp)",
		Example: `  nodetide version
  nodetide version -o json
  nodetide --version`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return writeVersion(g.stdout, g.output, buildinfo.Read())
		},
	}
	addOutputFlag(cmd, g, "table", "table", "json", "yaml")
	return cmd
}

func writeVersion(w io.Writer, format string, in buildinfo.Info) error {
	switch format {
	case "json":
		return writeJSON(w, in)
	case "yaml":
		out, err := yaml.Marshal(in)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	commit := orNone(in.Commit)
	if in.Modified {
		commit += " (with uncommitted changes)"
	}
	fmt.Fprintf(tw, "Version:\t%s\n", in.Version)
	fmt.Fprintf(tw, "Commit:\t%s\n", commit)
	fmt.Fprintf(tw, "Date:\t%s\n", orNone(in.Date))
	fmt.Fprintf(tw, "Go version:\t%s\n", in.GoVersion)
	fmt.Fprintf(tw, "Platform:\t%s\n", in.Platform)
	return tw.Flush()
}
