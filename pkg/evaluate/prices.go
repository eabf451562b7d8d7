package evaluate

import (
	"context"
	"time"

	"github.com/nodetide/nodetide/pkg/providers"
	"github.com/nodetide/nodetide/pkg/snapshot"
)

// priceReadTimeout bounds a cycle's wait for its providers' price sources:
// a price list that does not answer costs the cycle its prices, not its
// scale-up.
const priceReadTimeout = 10 * time.Second

// providerPrices gives every described group without a price from the
// config the price its provider's source has (through the cache in the
// state table), when the decision uses prices (the price expander, replace
// consolidation). A group whose price
// cannot be had keeps none (never a zero): the status lists it as
// PriceMissing, and the cause is logged.
func (e *Evaluator) providerPrices(ctx context.Context, groups []providers.NodeGroup, described []snapshot.NodeGroup) {
	if e.Prices == nil || !e.Settings.UsesPrices() {
		return
	}
	var need []providers.NodeGroup
	for i := range described {
		if described[i].Price == nil && described[i].MaxSize > 0 {
			need = append(need, groups[i])
		}
	}
	if len(need) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, priceReadTimeout)
	defer cancel()
	got := providers.Prices(ctx, need, e.Prices)
	for i := range described {
		gp, ok := got[described[i].Name]
		switch {
		case !ok:
		case gp.Quote == nil:
			e.log().Warn("node group has no price", "nodeGroup", described[i].Name, "error", gp.Err.Error())
		default:
			q := gp.Quote
			if q.RefreshErr != nil {
				e.log().Warn("node group price not refreshed", "nodeGroup", described[i].Name,
					"stale", q.Stale, "age", q.Age.Round(time.Second).String(), "error", q.RefreshErr.Error())
			}
			described[i].Price = &snapshot.Price{PerHour: q.PerHour, Currency: q.Currency, Source: snapshot.PriceSource(q.Source)}
		}
	}
}
