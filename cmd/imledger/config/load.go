package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// EnvPrefix starts every environment variable the loader reads.
const EnvPrefix = "IM_"

// Sources are the inputs of Load besides the built-in defaults.
type Sources struct {
	// Flags is the parsed command line; nil means none. The --config flag, when set, names the
	// YAML file; the other flags registered by RegisterFlags override their keys when given.
	Flags *pflag.FlagSet
	// Environ is the environment as "NAME=value" strings (os.Environ() in the binary); nil means
	// an empty environment.
	Environ []string
}

// Key describes one configuration key.
type Key struct {
	Name    string // dotted koanf path, as written in YAML: "postgres.url"
	Env     string // environment variable: "IM_POSTGRES_URL"
	Default any    // value in Defaults()
}

// Keys lists every configuration key in name order.
func Keys() []Key {
	flat := flatten(Defaults())
	keys := make([]Key, 0, len(flat))
	for name, def := range flat {
		keys = append(keys, Key{Name: name, Env: envName(name), Default: def})
	}
	slices.SortFunc(keys, func(a, b Key) int { return strings.Compare(a.Name, b.Name) })
	return keys
}

// Load builds the configuration from, lowest precedence first: Defaults(), the YAML file named by
// --config, IM_* environment variables and the flags set on the command line; then validates it.
//
// Environment variables are the key upper-cased with '.' written as '_' and IM_ in front
// (postgres.url → IM_POSTGRES_URL, mysql.database_template → IM_MYSQL_DATABASE_TEMPLATE); list
// values are comma-separated (IM_KAFKA_BROKERS=a:9092,b:9092). Variables that name no key are
// ignored here (see UnknownEnv). Unknown keys in the YAML file are an error.
func Load(src Sources) (Config, error) {
	ko := koanf.New(".")
	if err := ko.Load(confmap.Provider(flatten(Defaults()), "."), nil); err != nil {
		return Config{}, fmt.Errorf("load defaults: %w", err)
	}
	if path := configFile(src.Flags); path != "" {
		if err := ko.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("load config file %s: %w", path, err)
		}
	}
	byEnv := envKeys()
	envProvider := env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return src.Environ },
		TransformFunc: func(k, v string) (string, any) {
			return byEnv[k], v // "" drops variables that name no key
		},
	})
	if err := ko.Load(envProvider, nil); err != nil {
		return Config{}, fmt.Errorf("load environment: %w", err)
	}
	if src.Flags != nil {
		fp := posflag.ProviderWithFlag(src.Flags, ".", nil, func(f *pflag.Flag) (string, any) {
			return flagKeys[f.Name], posflag.FlagVal(src.Flags, f)
		})
		if err := ko.Load(fp, nil); err != nil {
			return Config{}, fmt.Errorf("load flags: %w", err)
		}
	}
	var c Config
	if err := unmarshal(ko, &c); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	return c, nil
}

// UnknownEnv returns the IM_* variables in environ that name no configuration key, so the binary
// can warn about typos such as IM_POSTGRESS_URL.
func UnknownEnv(environ []string) []string {
	byEnv := envKeys()
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix) && byEnv[name] == "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func envKeys() map[string]string {
	m := map[string]string{}
	for name := range flatten(Defaults()) {
		m[envName(name)] = name
	}
	return m
}

func configFile(fs *pflag.FlagSet) string {
	if fs == nil || fs.Lookup(FlagConfig) == nil {
		return ""
	}
	path, _ := fs.GetString(FlagConfig)
	return path
}

func unmarshal(ko *koanf.Koanf, c *Config) error {
	dc := &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			keyListHook,
			secretListHook,
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
			mapstructure.TextUnmarshallerHookFunc(),
		),
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		MatchName:        matchName,
		Result:           c,
	}
	if err := ko.UnmarshalWithConf("", c, koanf.UnmarshalConf{DecoderConfig: dc}); err != nil {
		return fmt.Errorf("decode configuration: %w", err)
	}
	return nil
}
