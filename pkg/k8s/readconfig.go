package k8s

import "k8s.io/client-go/rest"

// Protobuf is the API server's binary encoding: a fraction of JSON's size
// and decoding time for the built-in kinds.
const Protobuf = "application/vnd.kubernetes.protobuf"

// ReadConfig returns a copy of cfg for the read path: it asks for protobuf
// and accepts JSON from a server (or proxy) that does not offer it. Recent
// client-go typed clients do so by default when no content type is set; the
// read path says so explicitly, so a configuration choosing JSON cannot
// make every LIST several times larger.
func ReadConfig(cfg *rest.Config) *rest.Config {
	rc := rest.CopyConfig(cfg)
	rc.ContentType = Protobuf
	rc.AcceptContentTypes = Protobuf + ",application/json"
	return rc
}
