package tally_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/tally"
)

// Every method of the record is counted: a method the wrapper forgot would
// pass straight to the inner record uncounted, and the funnel's "no record
// call for a rejection" would be unproven for it.
func TestEveryMethodIsCounted(t *testing.T) {
	// The inner record is nil: each call reaches it only after the
	// wrapper has counted, and then panics.
	st := tally.Wrap(nil)
	req := &tally.Request{}
	ctx := tally.With(context.Background(), req)
	iface := reflect.TypeFor[flashsale.Store]()
	v := reflect.ValueOf(st)
	want := 0
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		if m.Name == "Close" {
			continue // not a call on anyone's behalf
		}
		want++
		fn := v.MethodByName(m.Name)
		args := []reflect.Value{reflect.ValueOf(ctx)}
		for j := 1; j < fn.Type().NumIn(); j++ {
			if fn.Type().IsVariadic() && j == fn.Type().NumIn()-1 {
				break
			}
			args = append(args, reflect.Zero(fn.Type().In(j)))
		}
		func() {
			defer func() { _ = recover() }()
			fn.Call(args)
		}()
		if req.Calls() != want {
			t.Fatalf("%s was not counted (%d calls counted, want %d)", m.Name, req.Calls(), want)
		}
	}
	if st.Background() != 0 || st.Total() != int64(want) {
		t.Fatalf("total %d, background %d; want %d and 0", st.Total(), st.Background(), want)
	}
	func() {
		defer func() { _ = recover() }()
		_ = st.Ping(context.Background())
	}()
	if st.Background() != 1 {
		t.Fatalf("a call outside any request counted %d times as background, want 1", st.Background())
	}
}

// A detached context counts with the background work.
func TestDetach(t *testing.T) {
	st := tally.Wrap(nil)
	req := &tally.Request{}
	ctx := tally.Detach(tally.With(context.Background(), req))
	func() {
		defer func() { _ = recover() }()
		_ = st.Ping(ctx)
	}()
	if req.Calls() != 0 || st.Background() != 1 {
		t.Fatalf("request %d calls, background %d; want 0 and 1", req.Calls(), st.Background())
	}
	if tally.Detach(context.Background()) != context.Background() {
		t.Fatal("detaching a context without a request made a new one")
	}
}
