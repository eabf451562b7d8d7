package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// SumsFile lists every other file of a release with its SHA-256, as
// sha256sum writes it (sha256sum -c SHA256SUMS checks them).
const SumsFile = "SHA256SUMS"

// WriteSums writes dir/SHA256SUMS for the files in dir, sorted by name, and
// returns how many it lists.
func WriteSums(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var b strings.Builder
	n := 0
	for _, e := range entries { // ReadDir sorts by name
		if e.Name() == SumsFile {
			continue
		}
		if !e.Type().IsRegular() {
			return 0, fmt.Errorf("%s: not a regular file", filepath.Join(dir, e.Name()))
		}
		sum, err := fileSum(filepath.Join(dir, e.Name()))
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
		n++
	}
	return n, os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644)
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
