package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The command line's conventions, one place for every command: --help
// prints the command's usage on standard output and exits 0; a mistake
// names the flag (--stock, never initialStock nor a Go parse error) and
// exits 2; listings take -o table|json.

// command describes one command or subcommand for its usage.
type command struct {
	// name is what follows "flashsale", e.g. "sale create".
	name string
	// args is the synopsis after the name, e.g. "--sku SKU --stock N [flags]".
	args string
	// about says what it does, in a sentence or a paragraph.
	about string
}

// newFlags returns the command's flag set: it prints nothing itself
// (parseFlags does), and its usage goes to out.
func newFlags(c command, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { printUsage(fs.Output(), c, fs) }
	return fs
}

// printUsage writes "Usage: flashsale NAME ARGS", what the command does and
// its flags, each with its environment variable.
func printUsage(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: flashsale %s %s\n", c.name, c.args)
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.about, "\n"))
	}
	var lines []string
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if kind != "" {
			head += " " + kind
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		lines = append(lines, fmt.Sprintf("%s\n      %s%s", head, usage, def))
	})
	if len(lines) > 0 {
		fmt.Fprintln(w, "\nFlags (each also read from FLASHSALE_<NAME>, e.g. FLASHSALE_ADMIN_TOKEN):")
		fmt.Fprintln(w, strings.Join(lines, "\n"))
	}
}

// parseFlags parses args into fs; every flag not given on the command line
// is taken from the environment variable FLASHSALE_<NAME>, with the flag's
// name in capitals and '-' as '_'. --help (or -h) prints the usage to the
// flag set's output and returns flag.ErrHelp, which run answers with exit
// status 0; a command line of the wrong shape is a usageError naming the
// flag (exit status 2), and a value that does not parse an error naming it
// (exit status 1, as any configuration error).
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := parseQuiet(fs, args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		env := "FLASHSALE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				// A value that does not parse is a configuration error,
				// like a bad value on the command line: exit status 1.
				errs = append(errs, fmt.Errorf("%s: %s (--%s) %q: %s", fs.Name(), env, f.Name, v, wants(f)))
			}
		}
	})
	if fs.NArg() > 0 {
		errs = append(errs, usageError{fmt.Sprintf("%s: unexpected arguments: %s", fs.Name(), strings.Join(fs.Args(), " "))})
	}
	return errors.Join(errs...)
}

// parseQuiet is fs.Parse, with the flag package's own messages replaced:
// the usage on --help, a sentence naming the flag otherwise.
func parseQuiet(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return flag.ErrHelp
	}
	msg := fmt.Sprintf("%s: %s (flashsale %s --help)", fs.Name(), flagMistake(fs, err), fs.Name())
	if badValue.MatchString(err.Error()) {
		// The command line has the right shape and a flag's value is
		// wrong: a configuration error (exit status 1), as a value that
		// parses but cannot be used is.
		return errors.New(msg)
	}
	return usageError{msg}
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	missingValue  = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	badValue      = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-+([^:]+): `)
)

// flagMistake says in a sentence what was wrong with the command line.
func flagMistake(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("there is no flag --%s", m[1])
	}
	if m := missingValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s needs a value", m[1])
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[2]); f != nil {
			return fmt.Sprintf("--%s %s: %s", m[2], m[1], wants(f))
		}
	}
	return msg
}

// wants says what a flag takes, by its type.
func wants(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "not a valid value"
	}
	switch g.Get().(type) {
	case int, int64, uint, uint64:
		return "not a whole number"
	case float64:
		return "not a number"
	case bool:
		return "not true or false"
	case time.Duration:
		return "not a duration (such as 90s, 15m or 2h)"
	}
	if v, ok := f.Value.(interface{ Choices() []string }); ok {
		return "must be one of " + strings.Join(v.Choices(), ", ")
	}
	return "not a valid value"
}

// given returns the flags set on the command line or by the environment.
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// require checks that every named flag was given (an int flag's zero is
// not the same as no value: "sale create" without --stock is a mistake,
// not a sale of nothing).
func require(fs *flag.FlagSet, names ...string) error {
	set := given(fs)
	var missing []string
	for _, n := range names {
		if !set[n] {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	verb := "is"
	if len(missing) > 1 {
		verb = "are"
	}
	return usageError{fmt.Sprintf("%s: %s %s required (flashsale %s --help)", fs.Name(), strings.Join(missing, " and "), verb, fs.Name())}
}

// choice is a flag with a fixed set of values.
type choice struct {
	value   string
	choices []string
}

func (c *choice) String() string    { return c.value }
func (c *choice) Get() any          { return c.value }
func (c *choice) Choices() []string { return c.choices }
func (c *choice) Set(s string) error {
	for _, v := range c.choices {
		if s == v {
			c.value = s
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(c.choices, ", "))
}

// outputFlag adds -o/--output table|json to a listing.
func outputFlag(fs *flag.FlagSet) *choice {
	c := &choice{value: "table", choices: []string{"table", "json"}}
	fs.Var(c, "o", "output: table or json")
	fs.Var(c, "output", "same as -o")
	return c
}

// apiFields maps the API's field names, as a server's error message may
// name them, to the command's flags, so that the message names what the
// operator typed.
type apiFields map[string]string

// say rewrites a server's message with flag names for field names.
func (a apiFields) say(msg string) string {
	if len(a) == 0 {
		return msg
	}
	fields := make([]string, 0, len(a))
	for f := range a {
		fields = append(fields, f)
	}
	// Longest first, so that registrationClosesAt is not read as
	// closesAt.
	sort.Slice(fields, func(i, j int) bool { return len(fields[i]) > len(fields[j]) })
	for _, f := range fields {
		msg = regexp.MustCompile(`\b`+regexp.QuoteMeta(f)+`\b`).ReplaceAllString(msg, "--"+a[f])
	}
	return msg
}

// isHelp reports whether args ask for a command group's usage.
func isHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help")
}
