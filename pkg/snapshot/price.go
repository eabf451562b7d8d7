package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Price is what one node of a group costs per hour, and where that figure
// came from. A group without one (nil) has an unknown price: never zero.
type Price struct {
	// PerHour is the price of one node for one hour in Currency. In a
	// document it is a number or a decimal string ("0.096").
	PerHour  float64     `json:"perHour"`
	Currency string      `json:"currency"`
	Source   PriceSource `json:"source"`
}

// PriceSource is where a group's price came from.
type PriceSource string

// Sources of a price. Only the config sets one today; the others name the
// provider catalogues a price may come from.
const (
	PriceConfig       PriceSource = "config"
	PriceAWSPriceList PriceSource = "aws-price-list"
	PriceAWSSpot      PriceSource = "aws-spot-history"
	PriceScaleway     PriceSource = "scaleway-catalogue"
	PriceKamatera     PriceSource = "kamatera-api"
)

// PriceSources are the sources a document may name.
var PriceSources = []PriceSource{PriceConfig, PriceAWSPriceList, PriceAWSSpot, PriceScaleway, PriceKamatera}

// MaxPerHour bounds a node's price per hour: above it a figure is a typo
// (a month's price, or cents) rather than any machine's.
const MaxPerHour = 10000

// CheckPerHour reports a per-hour price that is not finite, negative or
// above MaxPerHour.
func CheckPerHour(v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return errors.New("must be a finite number")
	case v < 0:
		return fmt.Errorf("must not be negative (got %v)", v)
	case v > MaxPerHour:
		return fmt.Errorf("must be at most %d per node-hour (got %v)", MaxPerHour, v)
	}
	return nil
}

// CheckCurrency reports a currency that is not a three-letter uppercase
// code (ISO 4217's form, e.g. USD, EUR).
func CheckCurrency(c string) error {
	if len(c) != 3 || !isUpper(c) {
		return fmt.Errorf("must be a three-letter uppercase currency code such as USD or EUR (got %q)", c)
	}
	return nil
}

func isUpper(s string) bool {
	for _, r := range s {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}

// parsePerHour reads a per-hour price written as a JSON number or a
// decimal string.
func parsePerHour(raw json.RawMessage) (float64, error) {
	text := bytes.TrimSpace(raw)
	if len(text) > 0 && text[0] == '"' {
		var s string
		if err := json.Unmarshal(text, &s); err != nil {
			return 0, err
		}
		text = []byte(s)
	}
	if len(text) == 0 || !isDecimal(text) {
		return 0, fmt.Errorf("must be a number or a decimal string (got %s)", raw)
	}
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return 0, fmt.Errorf("must be a finite number (got %s)", raw)
	}
	return v, nil
}

// isDecimal reports text made only of what a plain decimal number holds
// (no "NaN", "Inf" or hexadecimal, which ParseFloat would take).
func isDecimal(text []byte) bool {
	for _, c := range text {
		if (c < '0' || c > '9') && c != '.' && c != '-' && c != '+' && c != 'e' && c != 'E' {
			return false
		}
	}
	return true
}

// price decodes a group's price; validatePrice checks it.
func (d *docDecoder) price(path string, p **Price) error {
	if ok, err := d.open(path, '{'); err != nil || !ok {
		return err
	}
	pr := &Price{}
	seen := map[string]bool{}
	known := []string{"perHour", "currency", "source"}
	err := d.members(path, func() []string { return known }, seen, func(key, kp string) error {
		switch key {
		case "perHour":
			var raw json.RawMessage
			if err := d.value(kp, &raw); err != nil {
				return err
			}
			v, err := parsePerHour(raw)
			if err != nil {
				return &DocumentError{Path: kp, Err: err}
			}
			pr.PerHour = v
			return nil
		case "currency":
			return d.value(kp, &pr.Currency)
		case "source":
			return d.value(kp, &pr.Source)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range []string{"perHour", "currency"} {
		if !seen[k] {
			return &DocumentError{Path: joinPath(path, k), Err: errors.New("must be set")}
		}
	}
	*p = pr
	return nil
}

// validatePrice checks a group's price: a finite, bounded, non-negative
// figure in a currency code, from a known source.
func validatePrice(path string, p *Price) error {
	if p == nil {
		return nil
	}
	if err := CheckPerHour(p.PerHour); err != nil {
		return &DocumentError{Path: path + ".perHour", Err: err}
	}
	if err := CheckCurrency(p.Currency); err != nil {
		return &DocumentError{Path: path + ".currency", Err: err}
	}
	for _, s := range PriceSources {
		if p.Source == s {
			return nil
		}
	}
	return badDoc(path+".source", "must be one of %v (got %q)", PriceSources, p.Source)
}
