package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// checkCommandLine says whether a nodetide command line as the docs show
// it would parse: its subcommands exist, its flags are the command's, and
// it has as many arguments as the command takes. Nothing runs. line starts
// at the word after nodetide and ends at the first shell operator.
func checkCommandLine(line string) error {
	args := shellWords(line)
	root := newRoot(io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	if help, _ := cmd.Flags().GetBool("help"); help {
		return nil
	}
	var bad error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if vals, ok := f.Annotations[flagValues]; ok && !slices.Contains(vals, f.Value.String()) && bad == nil {
			bad = fmt.Errorf("%s --%s %q: takes one of %v", cmd.CommandPath(), f.Name, f.Value, vals)
		}
	})
	if bad != nil {
		return bad
	}
	pos := cmd.Flags().Args()
	if cmd.HasSubCommands() && len(pos) > 0 {
		return fmt.Errorf("%s has no subcommand %q", cmd.CommandPath(), pos[0])
	}
	if cmd.Args != nil && !cmd.HasSubCommands() {
		if err := cmd.Args(cmd, pos); err != nil {
			return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
		}
	}
	return nil
}

// shellWords splits a command line as a shell would for what the docs
// use: words, quoted strings (a "$(...)" substitution is one word) and the
// operators that end the nodetide command.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"' || c == '\'':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				j = len(line) - i - 1
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case !inWord && strings.ContainsRune("#|&;>", rune(c)):
			return words
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// checkCommandRef says whether a mention of a command in prose (an inline
// code span, possibly a synopsis such as "schedules list|get NAME" or
// "status [-o table|json|yaml]") names commands and flags that exist; its
// arguments are placeholders and are not counted.
func checkCommandRef(ref string) error {
	cmd := newRoot(io.Discard, io.Discard)
	word := regexp.MustCompile(`^[a-z][a-z-]*(\|[a-z][a-z-]*)*$`)
	flag := regexp.MustCompile(`^\[?(--?)([a-zA-Z][\w-]*)`)
	descending := true
	for _, w := range shellWords(ref) {
		if m := flag.FindStringSubmatch(w); m != nil {
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			fs := cmd.Flags()
			cmd.InheritedFlags() // merges the persistent flags of its parents into fs
			if (m[1] == "--" && fs.Lookup(m[2]) == nil) || (m[1] == "-" && (len(m[2]) != 1 || fs.ShorthandLookup(m[2]) == nil)) {
				return fmt.Errorf("%s has no flag %s%s", cmd.CommandPath(), m[1], m[2])
			}
			continue
		}
		if !descending || !cmd.HasSubCommands() || !word.MatchString(w) {
			descending = false
			continue
		}
		var next *cobra.Command
		for _, alt := range strings.Split(w, "|") {
			sub, _, err := cmd.Find([]string{alt})
			if err != nil || sub == cmd {
				return fmt.Errorf("%s has no subcommand %q", cmd.CommandPath(), alt)
			}
			if next == nil {
				next = sub
			}
		}
		cmd = next
	}
	return nil
}

// nodetideLine finds a nodetide command in a line of a shell block or an
// inline code span: after optional VAR=value assignments, "nodetide" or a
// path ending in /nodetide.
var nodetideLine = regexp.MustCompile(`^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\S*/)?nodetide(?:\s+(.*))?$`)

// docCommandLines lists the nodetide command lines a Markdown document
// shows in its sh blocks (joining lines that end in a backslash), and
// refs the inline code spans that start with nodetide.
func docCommandLines(doc string) (lines, refs []string) {
	for _, blk := range regexp.MustCompile("(?s)```(?:sh|bash|shell)\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		for _, l := range strings.Split(strings.ReplaceAll(blk[1], "\\\n", " "), "\n") {
			if m := nodetideLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
				lines = append(lines, m[1])
			}
		}
	}
	for _, span := range regexp.MustCompile("`((?:bin/)?nodetide [^`]+)`").FindAllStringSubmatch(doc, -1) {
		if m := nodetideLine.FindStringSubmatch(strings.TrimSpace(span[1])); m != nil {
			refs = append(refs, m[1])
		}
	}
	return lines, refs
}

// TestDocumentedCommandsExist: every nodetide command line the README,
// infra/README.md and the guides in docs/ show names commands and flags that
// exist, with the arguments they take.
func TestDocumentedCommandsExist(t *testing.T) {
	paths := []string{"../../README.md", "../../infra/README.md"}
	guides, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, path := range append(paths, guides...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines, refs := docCommandLines(string(b))
		total += len(lines) + len(refs)
		for _, l := range lines {
			if err := checkCommandLine(l); err != nil {
				t.Errorf("%s shows nodetide %s: %v", path, l, err)
			}
		}
		for _, r := range refs {
			if err := checkCommandRef(r); err != nil {
				t.Errorf("%s names nodetide %s: %v", path, r, err)
			}
		}
	}
	if total < 40 {
		t.Errorf("the docs show only %d nodetide command lines", total)
	}
}

// TestCheckCommandLine: the checker refuses what does not exist.
func TestCheckCommandLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"plan --snapshot snap.json -o json", true},
		{`webhook install --url "$(aws cloudformation describe-stacks --output text)"   # comment`, true},
		{"schedules validate day.json | head", true},
		{"status", true},
		{"plan --help", true},
		{"snapshot -o full -f full.json", true},
		{"snapshot -o snap.json", false},
		{"plan --snapshot s.json -o yaml", true},
		{"webhook manifest --url U -o table", false},
		{"plan --snapshots snap.json", false},
		{"snapshot --outfile x", false},
		{"schedules lst", false},
		{"add workers", false},
		{"nodez", false},
	} {
		if err := checkCommandLine(tc.line); (err == nil) != tc.ok {
			t.Errorf("checkCommandLine(%q) = %v, want ok %v", tc.line, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		ref string
		ok  bool
	}{
		{"schedules list|get NAME|delete NAME --config nodetide.yaml", true},
		{"status [-o table|json|yaml]", true},
		{"shutdown", true},
		{"COMMAND --help", true},
		{"webhook install --url", true},
		{"schedules list|gte NAME", false},
		{"status [--outptu json]", false},
		{"snapshot -x", false},
		{"nodez", false},
	} {
		if err := checkCommandRef(tc.ref); (err == nil) != tc.ok {
			t.Errorf("checkCommandRef(%q) = %v, want ok %v", tc.ref, err, tc.ok)
		}
	}
}
