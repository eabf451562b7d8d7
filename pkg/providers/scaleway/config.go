package scaleway

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/scaleway/scaleway-sdk-go/scw"
	"github.com/scaleway/scaleway-sdk-go/validation"
)

// DefaultAPIURL is where the Scaleway API lives when api_url is not set.
const DefaultAPIURL = "https://api.scaleway.com"

// Environment variables cluster-autoscaler reads; each wins over the file.
const (
	EnvClusterID = "CLUSTER_ID"
	EnvSecretKey = "SCW_SECRET_KEY"
	EnvRegion    = "SCW_REGION"
	EnvAPIURL    = "SCW_API_URL"
)

// CloudConfig is cluster-autoscaler's Scaleway cloud config: the JSON file
// given to its --cloud-config flag, read unchanged. Printing it (fmt, slog,
// encoding/json) never shows the secret key.
type CloudConfig struct {
	// ClusterID is the Kapsule cluster whose pools are scaled.
	ClusterID string `json:"cluster_id"`
	// SecretKey is the IAM API key's secret, sent as X-Auth-Token.
	SecretKey string `json:"secret_key"`
	// Region is where the cluster's control plane runs (fr-par, nl-ams, pl-waw).
	Region string `json:"region"`
	// APIURL is the Scaleway API endpoint; empty means DefaultAPIURL.
	APIURL string `json:"api_url"`
}

// LoadCloudConfig reads cluster-autoscaler's JSON cloud config at path (none
// when path is empty) and lets the environment override it, as
// cluster-autoscaler does: a non-empty CLUSTER_ID, SCW_SECRET_KEY, SCW_REGION
// or SCW_API_URL wins over the file. getenv nil means os.Getenv. The result is
// validated; errors name the file and the field (or variable), never the key.
func LoadCloudConfig(path string, getenv func(string) string) (CloudConfig, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	where := "scaleway cloud config"
	if path != "" {
		where += " " + path
	}
	var cfg CloudConfig
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return CloudConfig{}, fmt.Errorf("%s: %w", where, err)
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return CloudConfig{}, fmt.Errorf("%s: %w", where, describeJSONError(data, err))
		}
	}
	fromEnv := map[string]bool{}
	for env, dst := range map[string]*string{
		EnvClusterID: &cfg.ClusterID,
		EnvSecretKey: &cfg.SecretKey,
		EnvRegion:    &cfg.Region,
		EnvAPIURL:    &cfg.APIURL,
	} {
		if v := strings.TrimSpace(getenv(env)); v != "" {
			*dst = v
			fromEnv[env] = true
		}
	}
	cfg, err := cfg.normalize(fromEnv)
	if err != nil {
		return CloudConfig{}, fmt.Errorf("%s: %w", where, err)
	}
	return cfg, nil
}

// describeJSONError turns a decoding error into one that says where, without
// quoting the input: a syntax error's message can carry a character of the
// secret key.
func describeJSONError(data []byte, err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		line, col := position(data, syn.Offset)
		return fmt.Errorf("line %d, column %d: not valid JSON", line, col)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" {
			return fmt.Errorf("expected a JSON object, got %s", typ.Value)
		}
		return fmt.Errorf("field %s: expected a %s, got %s", typ.Field, typ.Type, typ.Value)
	}
	return errors.New("not valid JSON")
}

func position(data []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < offset-1 && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line, col = line+1, 1
			continue
		}
		col++
	}
	return line, col
}

// Validate reports every missing or malformed field, naming each; it never
// quotes the secret key.
func (c CloudConfig) Validate() error {
	_, err := c.normalize(nil)
	return err
}

// normalize trims values, fills the API URL default, maps legacy region names
// and checks every field. fromEnv marks the variables that set a field, so an
// error names the variable rather than the file's field.
func (c CloudConfig) normalize(fromEnv map[string]bool) (CloudConfig, error) {
	name := func(field, env string) string {
		if fromEnv[env] {
			return env
		}
		return field
	}
	c.ClusterID = strings.TrimSpace(c.ClusterID)
	c.SecretKey = strings.TrimSpace(c.SecretKey)
	c.Region = strings.TrimSpace(c.Region)
	c.APIURL = strings.TrimSpace(c.APIURL)

	var errs []error
	switch {
	case c.ClusterID == "":
		errs = append(errs, fmt.Errorf("cluster_id: is required (or set %s)", EnvClusterID))
	case strings.ContainsAny(c.ClusterID, "/?# \t"):
		errs = append(errs, fmt.Errorf("%s: %q is not a Kapsule cluster ID", name("cluster_id", EnvClusterID), c.ClusterID))
	}
	switch {
	case c.SecretKey == "":
		errs = append(errs, fmt.Errorf("secret_key: is required (or set %s)", EnvSecretKey))
	case !validation.IsSecretKey(c.SecretKey):
		// The value is never quoted: a near-miss is still most of a secret.
		errs = append(errs, fmt.Errorf("%s: not a Scaleway secret key (a UUID); the value is not shown", name("secret_key", EnvSecretKey)))
	}
	if c.Region == "" {
		errs = append(errs, fmt.Errorf("region: is required (or set %s)", EnvRegion))
	} else if r, err := scw.ParseRegion(c.Region); err != nil {
		errs = append(errs, fmt.Errorf("%s: %q is not a Scaleway region (like fr-par, nl-ams, pl-waw)", name("region", EnvRegion), c.Region))
	} else {
		c.Region = r.String()
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	// cluster-autoscaler appends paths to the URL as given, so a trailing
	// slash worked there; the SDK refuses one.
	c.APIURL = strings.TrimRight(c.APIURL, "/")
	if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%s: %q is not an http(s) URL", name("api_url", EnvAPIURL), c.APIURL))
	}
	return c, errors.Join(errs...)
}

const redacted = "<redacted>"

func (c CloudConfig) shownKey() string {
	if c.SecretKey == "" {
		return "<unset>"
	}
	return redacted
}

// String shows the config with the secret key redacted.
func (c CloudConfig) String() string {
	return fmt.Sprintf("{cluster_id:%s region:%s api_url:%s secret_key:%s}", c.ClusterID, c.Region, c.APIURL, c.shownKey())
}

// GoString keeps %#v from printing the key.
func (c CloudConfig) GoString() string { return "scaleway.CloudConfig" + c.String() }

// Format makes every fmt verb (%v, %+v, %s, %q, ...) go through String, so
// the key cannot leak through a struct that embeds the config.
func (c CloudConfig) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprintf(f, "%q", c.String())
	case 'v':
		if f.Flag('#') {
			fmt.Fprint(f, c.GoString())
			return
		}
		fmt.Fprint(f, c.String())
	default:
		fmt.Fprint(f, c.String())
	}
}

// LogValue keeps slog from logging the key.
func (c CloudConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("cluster_id", c.ClusterID),
		slog.String("region", c.Region),
		slog.String("api_url", c.APIURL),
		slog.String("secret_key", c.shownKey()),
	)
}

// MarshalJSON writes the config with the key redacted, so dumping a loaded
// config (config validate -o json, debug output) cannot publish it. Reading
// goes through the default decoder, so cluster-autoscaler's files load as is.
func (c CloudConfig) MarshalJSON() ([]byte, error) {
	type shown struct {
		ClusterID string `json:"cluster_id"`
		SecretKey string `json:"secret_key"`
		Region    string `json:"region"`
		APIURL    string `json:"api_url"`
	}
	return json.Marshal(shown{c.ClusterID, c.shownKey(), c.Region, c.APIURL})
}
