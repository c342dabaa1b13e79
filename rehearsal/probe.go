package rehearsal

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Against a target, the isolation probe runs in a process of its own, so
// that what it measures is the server's isolation and not the crowd's: the
// crowd's own HTTP client is the heaviest thing on a machine that runs
// both, and a probe inside it waits for the same scheduler as the crowd,
// which a quiet shopper on another machine never does. The rehearsal
// starts the probe as a child process (Config.ProbeCommand), waits for its
// idle baseline, then lowers its own scheduling priority (Config.CrowdNice)
// so that the crowd takes the CPU the server leaves, as clients on other
// machines would, while the server, its Redis and PostgreSQL, and the
// probe keep theirs.
//
// The protocol between the two is lines on the child's standard streams:
// the child writes probeIdleLine once its idle baseline is taken, measures
// "during" until its standard input closes, then writes its QuietFigures
// as one JSON document and exits. Meanwhile the rehearsal writes
// probeRushLine to it when the crowd starts to arrive and probeCalmLine
// once the whole crowd has arrived: the rounds between are the rush.

// The protocol's lines.
const (
	probeIdleLine = "idle baseline taken"
	probeRushLine = "rush"
	probeCalmLine = "calm"
)

// Probe runs only the isolation probe against cfg.Target, for the quiet
// sale with the given SKU (which the parent rehearsal created): it measures
// the idle baseline, says so on out, measures "during" (and the rush, as
// in's lines say) until in reaches its end or ctx is done, and writes the
// figures to out as JSON. It is the body of the child process that
// Config.ProbeCommand starts.
func Probe(ctx context.Context, cfg Config, sku string, in io.Reader, out io.Writer) error {
	if sku == "" {
		return errors.New("the probe needs the quiet sale's SKU")
	}
	base, room, err := bases(cfg)
	if err != nil {
		return err
	}
	q, err := startQuiet(ctx, cfg, newHTTPClient(base, sku, 8, shopperSecret(cfg)).withClaim(cfg.InstrumentClaim).withRoom(room))
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(out, probeIdleLine); err != nil {
		q.stop()
		return err
	}
	ended := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(in)
		for lines.Scan() {
			switch lines.Text() {
			case probeRushLine:
				q.rush.Store(true)
			case probeCalmLine:
				q.rush.Store(false)
			}
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	q.stop()
	return json.NewEncoder(out).Encode(q.figures())
}

// probeChild is the probe's child process, seen from the rehearsal.
type probeChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
}

// probeWait bounds how long the rehearsal waits for the child's idle
// baseline (quietIdle, plus the child's start) and for its figures.
const probeWait = quietIdle + 30*time.Second

// startProbeChild starts argv with the quiet sale's SKU appended (and env
// added to the environment) and returns once the child has taken its idle
// baseline.
func startProbeChild(ctx context.Context, argv []string, env []string, sku string) (*probeChild, error) {
	p := &probeChild{cmd: exec.CommandContext(ctx, argv[0], append(argv[1:len(argv):len(argv)], sku)...)}
	p.cmd.Env = append(p.cmd.Environ(), env...)
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.out = bufio.NewReader(stdout)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the isolation probe: %w", err)
	}
	line, err := p.readLine()
	if err != nil || line != probeIdleLine {
		p.kill()
		return nil, p.failed("no idle baseline", line, err)
	}
	return p, nil
}

// readLine reads one line of the child's output, within probeWait.
func (p *probeChild) readLine() (string, error) {
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		line, err := p.out.ReadString('\n')
		got <- result{strings.TrimSpace(line), err}
	}()
	select {
	case r := <-got:
		return r.line, r.err
	case <-time.After(probeWait):
		return "", errors.New("timed out")
	}
}

// rush tells the child that the crowd started to arrive (on) or has all
// arrived. A child that is gone is found out by finish.
func (p *probeChild) rush(on bool) {
	line := probeCalmLine
	if on {
		line = probeRushLine
	}
	_, _ = io.WriteString(p.stdin, line+"\n")
}

// finish ends the child's "during" measurement and returns its figures.
func (p *probeChild) finish() (*QuietFigures, error) {
	_ = p.stdin.Close()
	line, err := p.readLine()
	if err != nil {
		p.kill()
		return nil, p.failed("no figures", line, err)
	}
	var f QuietFigures
	if err := json.Unmarshal([]byte(line), &f); err != nil {
		p.kill()
		return nil, p.failed("unreadable figures", line, err)
	}
	if err := p.cmd.Wait(); err != nil {
		return nil, p.failed("exit", "", err)
	}
	return &f, nil
}

func (p *probeChild) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// failed describes a child that did not keep to the protocol: its error
// output if it wrote any, else the line it wrote instead. The caller has
// waited for the child, so its error output is complete.
func (p *probeChild) failed(what, line string, err error) error {
	if err == nil {
		err = fmt.Errorf("it wrote %q", line)
	}
	if msg := strings.TrimSpace(p.stderr.String()); msg != "" {
		return fmt.Errorf("the isolation probe: %s: %w (%s)", what, err, msg)
	}
	return fmt.Errorf("the isolation probe: %s: %w", what, err)
}
