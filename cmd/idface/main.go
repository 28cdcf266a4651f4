// Command idface is the one CLI of the idface system: protected 1:N face
// identification (IDFace, ICCV 2025) with 2PC/MPC secret sharing, blind
// mode (additive shares and a decider), replicated mode (2-of-3 shares,
// any one server may deviate or be down; hidden probes) or homomorphic
// encryption. Run "idface help" for the commands.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand: run gets the arguments after its name.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) error) {
	commands[name] = command{summary, run}
}

// errUsage marks an error already explained by the flag set's usage text.
var errUsage = errors.New("usage")

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 { // a script that lost its arguments fails
		usage(stderr)
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "idface: unknown command %q; run 'idface help' for the commands\n", args[0])
		return 2
	}
	if err := c.run(args[1:], stdout, stderr); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.err != nil { // nil: the command said what happened
				fmt.Fprintf(stderr, "idface %s: %v\n", args[0], err)
			}
			return ee.code
		}
		if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		fmt.Fprintf(stderr, "idface %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "idface: protected 1:N face identification (IDFace, ICCV 2025)")
	fmt.Fprintln(w, "\nUsage: idface <command> [flags]   (idface <command> --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}

// exitError is a failure with its own exit code, for scripts that act on
// which failure it was (cluster status).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// subcommand is one command of a group (cluster, party, client).
type subcommand struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

// group runs the subcommand args[0] names; --help lists the subcommands
// (exit 0), no subcommand or an unknown one lists them as an error.
func group(name string, subs []subcommand, args []string, stdout, stderr io.Writer) error {
	list := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: idface %s <subcommand> [flags]   (idface %s <subcommand> --help for its flags)\n\nSubcommands:\n", name, name)
		width := 10
		for _, s := range subs {
			width = max(width, len(s.name))
		}
		for _, s := range subs {
			fmt.Fprintf(w, "  %-*s %s\n", width, s.name, s.summary)
		}
	}
	if len(args) == 0 {
		list(stderr)
		return errUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		list(stdout)
		return nil
	}
	names := make([]string, len(subs))
	for i, s := range subs {
		if s.name == args[0] {
			return s.run(args[1:], stdout, stderr)
		}
		names[i] = s.name
	}
	fmt.Fprintf(stderr, "idface %s: unknown subcommand %q; the subcommands are %s\n\n", name, args[0], strings.Join(names, ", "))
	list(stderr)
	return errUsage
}

// dirAlias is --dir, the old name of --cluster in the cluster commands: it
// still sets the directory, warns, and is left out of the help.
type dirAlias struct {
	to *string
	w  io.Writer
}

func (a dirAlias) String() string {
	if a.to == nil {
		return ""
	}
	return *a.to
}

func (a dirAlias) Set(s string) error {
	fmt.Fprintln(a.w, "idface: --dir is deprecated: use --cluster (the same directory)")
	*a.to = s
	return nil
}

// clusterDirFlag is --cluster, the local cluster directory of every
// command, with the hidden alias --dir.
func clusterDirFlag(fs *flag.FlagSet, usage string) *string {
	dir := fs.String("cluster", "", usage)
	fs.Var(dirAlias{dir, fs.Output()}, "dir", "deprecated: --cluster")
	return dir
}

// newFlags returns a flag set that returns errors instead of exiting.
// Parsed with parse or parseFlags, --help prints the full usage (to
// stderr, exit 0); a usage error prints one line and a hint to run
// --help, as does fs.Usage() once parsed.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: idface %s\n\n%s\n\nFlags:\n", name, synopsis)
		shown := flag.NewFlagSet(name, flag.ContinueOnError)
		shown.SetOutput(stderr)
		fs.VisitAll(func(f *flag.Flag) {
			if _, hidden := f.Value.(dirAlias); !hidden {
				shown.Var(f.Value, f.Name, f.Usage)
				shown.Lookup(f.Name).DefValue = f.DefValue // Var takes the current value
			}
		})
		shown.PrintDefaults()
	}
	return fs
}

// parseFlags parses flags: --help prints the full usage (newFlags');
// an error prints itself and a one-line hint (the help of some commands
// runs to 70 lines, which buried the error). From then on fs.Usage()
// prints the hint.
func parseFlags(fs *flag.FlagSet, args []string) error {
	full, out := fs.Usage, fs.Output()
	hint := func() { fmt.Fprintf(out, "run 'idface %s --help' for its usage and flags\n", fs.Name()) }
	var quiet bytes.Buffer // flag prints the error and then the usage: both come below
	fs.SetOutput(&quiet)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = hint
	switch {
	case errors.Is(err, flag.ErrHelp):
		full()
		return err
	case err != nil:
		fmt.Fprintf(out, "idface %s: %v\n", fs.Name(), err)
		hint()
		return errUsage
	}
	return nil
}

// parse parses flags and rejects stray positional arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "idface %s: unexpected arguments: %s\n", fs.Name(), strings.Join(fs.Args(), " "))
		fs.Usage()
		return errUsage
	}
	return nil
}

// requireCluster reports a missing cluster directory, given as --cluster
// or its alias --dir.
func requireCluster(fs *flag.FlagSet, dir *string) error {
	if *dir == "" {
		return required(fs, "cluster")
	}
	return nil
}

// required reports a missing required flag the way flag does.
func required(fs *flag.FlagSet, names ...string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, n := range names {
		if !set[n] {
			fmt.Fprintf(fs.Output(), "idface %s: --%s is required\n", fs.Name(), n)
			fs.Usage()
			return errUsage
		}
	}
	return nil
}
