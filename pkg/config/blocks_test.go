package config

import (
	"reflect"
	"slices"
	"testing"
)

// TestProviderBlocksListEveryBlockOnce: each provider block of a
// nodeGroups entry (a pointer field other than headroom and price) has one
// line in providerBlocks, named by its YAML key, whose set sees that block
// and no other. (The fields are unique, so no line is there twice.)
func TestProviderBlocksListEveryBlockOnce(t *testing.T) {
	var names []string
	for _, b := range providerBlocks() {
		names = append(names, b.name)
	}
	typ := reflect.TypeFor[NodeGroup]()
	var fields []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		key := f.Tag.Get("yaml")
		if f.Type.Kind() != reflect.Pointer || f.Type.Elem().Kind() != reflect.Struct || key == "headroom" || key == "price" {
			continue
		}
		fields = append(fields, key)
		var g NodeGroup
		reflect.ValueOf(&g).Elem().Field(i).Set(reflect.New(f.Type.Elem()))
		for _, b := range providerBlocks() {
			if got, want := b.set(&g), b.name == key; got != want {
				t.Errorf("with block %s set, %s's set says %v", key, b.name, got)
			}
		}
	}
	if !slices.Equal(names, fields) {
		t.Errorf("providerBlocks %v, NodeGroup's blocks %v", names, fields)
	}
}
