package main

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// ZipFiles writes a zip of files (name in the zip → path on disk) whose
// bytes depend on the files' contents alone: entries sorted by name, each
// with the time given (not the file's) and mode 0755 (a bootstrap must be
// executable; the file's own mode depends on the umask), deflated.
func ZipFiles(out string, modified time.Time, files map[string]string) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw := zip.NewWriter(f)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := addFile(zw, name, files[name], modified); err != nil {
			return fmt.Errorf("zip %s: %w", out, err)
		}
	}
	return zw.Close()
}

func addFile(zw *zip.Writer, name, path string, modified time.Time) error {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: modified.UTC()}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, src)
	return err
}
