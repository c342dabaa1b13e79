package httpapi

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/catalog"
)

// realSaleStore has one sale, "real".
type realSaleStore struct{ flashsale.SaleStore }

func (realSaleStore) SaleBySKU(_ context.Context, sku string) (*flashsale.Sale, error) {
	if sku != "real" {
		return nil, flashsale.ErrNotFound
	}
	return &flashsale.Sale{ID: "sale_1", SKU: "real"}, nil
}

// Rejections are counted for the operator's view only against SKUs that
// name a sale: a client sending a new SKU with every request leaves
// nothing behind.
func TestRejectionsCountOnlySales(t *testing.T) {
	cat := catalog.New(realSaleStore{}, catalog.Config{})
	if _, err := cat.BySKU(context.Background(), "real"); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Catalog: cat})
	unauth := flashsale.Errorf(flashsale.CodeUnauthenticated, "no")
	for i := range 1000 {
		s.reject(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), fmt.Sprintf("nope-%d", i), unauth)
	}
	s.reject(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), "real", unauth)
	kept := 0
	s.rejections.m.Range(func(any, any) bool { kept++; return true })
	if got := s.rejections.of("real"); kept != 1 || got["unauthenticated"] != 1 {
		t.Fatalf("%d SKUs counted, real's %v; want only real's one unauthenticated", kept, got)
	}
}
