package config_test

import (
	"fmt"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

type ServerOptions struct {
	Listen            string        `yaml:"listen"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	AllowedOrigins    []string      `yaml:"allowed_origins"`
}

type Config struct {
	Server ServerOptions `yaml:"server"`
}

func Example() {
	// Defaults first.
	cfg := Config{Server: ServerOptions{Listen: ":8080", ReadHeaderTimeout: 5 * time.Second}}

	// Then the file, then the environment (os.Environ() in a real program).
	file := []byte(`
server:
  listen: ":9090"
  read_header_timeout: 10s
`)
	environ := []string{"PORTCULLIS_SERVER_LISTEN=:7070", "PORTCULLIS_SERVER_ALLOWED_ORIGINS=https://a.example, https://b.example"}
	if err := config.Load(&cfg, file, environ, "PORTCULLIS_"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Server.Listen, cfg.Server.ReadHeaderTimeout, cfg.Server.AllowedOrigins)
	// Output: :7070 10s [https://a.example https://b.example]
}

func Example_problems() {
	var cfg Config
	file := []byte(`
server:
  listn: ":9090"
  read_header_timeout: ten
`)
	environ := []string{"PORTCULLIS_SERVER_LISTEM=:7070"}
	err := config.Load(&cfg, file, environ, "PORTCULLIS_")
	for _, p := range config.Problems(err) {
		fmt.Println(p)
	}
	// Output:
	// server.listn (file line 3): unknown key; did you mean server.listen?
	// server.read_header_timeout (file line 4): time: invalid duration "ten"
	// env PORTCULLIS_SERVER_LISTEM: unknown environment variable; did you mean PORTCULLIS_SERVER_LISTEN?
}

func ExampleKeys() {
	for _, k := range config.Keys(Config{}, "PORTCULLIS_") {
		fmt.Println(k.Path, k.Env)
	}
	// Output:
	// server.listen PORTCULLIS_SERVER_LISTEN
	// server.read_header_timeout PORTCULLIS_SERVER_READ_HEADER_TIMEOUT
	// server.allowed_origins PORTCULLIS_SERVER_ALLOWED_ORIGINS
}
