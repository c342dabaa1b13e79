// Command flashsale runs the flash-sale engine and the tools around it.
//
//	flashsale serve     run the server (embedded default: in-process gate, SQLite)
//	flashsale token     print a shopper JWT signed with the development key
//	flashsale sale      create, list, show, update, watch, pause, resume, rebuild sales
//	flashsale verify    recompute a published draw and check its commitment
//	flashsale order     list orders, show one's history, ship, cancel, refund
//	flashsale outbox    the outbox's figures; list and replay dead letters
//	flashsale rehearse  run a whole sale with synthetic shoppers, in process or against a server
//
// Run "flashsale <command> --help" for the flags of each.
//
// Overselling is prevented in the stock gate (packages memory and redis) and
// could be caused where units come back (package restock); the command only
// wires and drives them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

const usage = `flashsale: a flash-sale engine.

Usage:
  flashsale serve [flags]           run the server (flashsale serve -h)
  flashsale serve --demo            ... with a demo sale that opens shortly
  flashsale token --user ID         print a shopper JWT for trying the routes by hand
  flashsale sale create|list|show|update|watch|pause|resume|rebuild ...
                                    drive the operator routes of a running server
  flashsale sale watch SKU          the sale live in the terminal, redrawn every second
  flashsale verify URL|FILE         recompute a random or lottery sale's published draw
  flashsale order list SKU | history ID | ship|cancel|refund ID --version N
  flashsale outbox stats | dead | replay ID
  flashsale rehearse --users N --units M [--target URL] [--bots P] ...
                                    run a whole sale with synthetic shoppers and print the funnel
  flashsale help COMMAND            a command's usage (or flashsale COMMAND --help)

The operator's console is at http://<server>/admin/ (docs/console.md).
`

// run is the whole program, with its environment passed in, so that tests
// run commands end to end. Asking for help (--help on any command) is not
// an error: the usage is printed on stdout and the exit status is 0.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
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
	case "help", "-h", "--help", "-help":
		if len(args) > 1 && args[1] != "help" && !isHelp(args[1:2]) {
			// "flashsale help sale create": that command's --help.
			return dispatch(ctx, append(append([]string(nil), args[1:]...), "--help"), getenv, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}
