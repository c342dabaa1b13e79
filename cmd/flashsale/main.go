// Command flashsale runs the flash-sale engine and the tools around it.
//
//	flashsale serve     run the server (embedded default: in-process gate, SQLite)
//	flashsale token     print a shopper JWT signed with the development key
//	flashsale sale      create, list, show, pause, resume, rebuild sales
//	flashsale verify    recompute a published draw and check its commitment
//	flashsale order     list orders, show one's history, ship, cancel, refund
//	flashsale outbox    the outbox's figures; list and replay dead letters
//	flashsale rehearse  run a whole sale with synthetic shoppers, in process or against a server
//
// Run "flashsale <command> -h" for the flags of each.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "flashsale:", oneLine(err))
		}
		os.Exit(exitCode(err))
	}
}

// oneLine is err's message on one line: an operator (or a supervisor's
// log) reads the reason a start failed from the last line, and errors
// joined with errors.Join span several.
func oneLine(err error) string {
	var b strings.Builder
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if b.Len() > 0 {
			if s := b.String(); !strings.HasSuffix(s, ":") && !strings.HasSuffix(s, ";") {
				b.WriteByte(';')
			}
			b.WriteByte(' ')
		}
		b.WriteString(line)
	}
	return b.String()
}

// usageError is a mistake in the shape of the command line (an unknown
// command or flag, a flag without its value, a stray argument): exit
// status 2, with the usage printed. A flag's value that is wrong is a
// configuration error like any other: one line, exit status 1.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

const usage = `flashsale: a flash-sale engine.

Usage:
  flashsale serve [flags]           run the server (flashsale serve -h)
  flashsale serve --demo            ... with a demo sale that opens shortly
  flashsale token --user ID         print a shopper JWT for trying the routes by hand
  flashsale sale create|list|show|pause|resume|rebuild ...
                                    drive the operator routes of a running server
  flashsale verify URL|FILE         recompute a random or lottery sale's published draw
  flashsale order list SKU | history ID | ship|cancel|refund ID --version N
  flashsale outbox stats | dead | replay ID
  flashsale rehearse --users N --units M [--target URL] [--bots P] ...
                                    run a whole sale with synthetic shoppers and print the funnel
`

// run is the whole program, with its environment passed in, so that tests
// run commands end to end.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{"no command given"}
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], getenv, stdout, stderr)
	case "token":
		return tokenCmd(args[1:], getenv, stdout, stderr)
	case "sale":
		return saleCmd(ctx, args[1:], getenv, stdout, stderr)
	case "verify":
		return verifyCmd(ctx, args[1:], getenv, stdout, stderr)
	case "order":
		return orderCmd(ctx, args[1:], getenv, stdout, stderr)
	case "outbox":
		return outboxCmd(ctx, args[1:], getenv, stdout, stderr)
	case "rehearse":
		return rehearse(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

// parseFlags parses args into fs; every flag not given on the command line
// is taken from the environment variable FLASHSALE_<NAME>, with the flag's
// name in capitals and '-' as '_'. A value that does not parse is an error
// of one line naming the flag (exit status 1); an unknown flag, or one
// without its value, a usage error, with the usage printed.
func parseFlags(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package would print the usage for any error
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err != nil {
		if m := badValue.FindStringSubmatch(err.Error()); m != nil {
			return fmt.Errorf("%s: --%s: invalid value %s: %s", fs.Name(), m[2], m[1], m[3])
		}
		fs.Usage()
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
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
				errs = append(errs, fmt.Errorf("%s: %s (--%s): invalid value: %v", fs.Name(), env, f.Name, err))
			}
		}
	})
	if fs.NArg() > 0 {
		errs = append(errs, usageError{fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args(), " "))})
	}
	return errors.Join(errs...)
}

// badValue matches the flag package's error for a value that does not
// parse: the value, the flag's name and why.
var badValue = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-(\S+): (.*)$`)
