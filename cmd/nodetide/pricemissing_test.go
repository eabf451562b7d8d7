package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nodetide/nodetide/pkg/evaluate"
)

// TestStatusShowsPriceMissing: nodetide status prints the problem with
// the groups it names.
func TestStatusShowsPriceMissing(t *testing.T) {
	st := sampleStatus()
	st.Problems = []evaluate.Problem{{Kind: evaluate.ProblemPriceMissing, Count: 2,
		Detail: "legacy, spot; the price expander ranks a group without a price after every priced one; set nodeGroups[].price"}}
	var out bytes.Buffer
	if err := writeStatusTable(&out, statusDoc{Cluster: "prod", Status: st, DrainsReadAt: statusNow}, statusNow); err != nil {
		t.Fatal(err)
	}
	want := "Problem:      PriceMissing (2): legacy, spot; the price expander ranks a group without a price after every priced one; set nodeGroups[].price\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("status table lacks %q:\n%s", want, out.String())
	}
}
