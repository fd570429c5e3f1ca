package observability

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestBuildInfo: portcullis_build_info names the build, the patches of
// the MCP SDK and of fosite among it, each empty when the module is as
// released.
func TestBuildInfo(t *testing.T) {
	for _, tt := range []struct {
		name string
		info BuildInfo
		want string // the series, %s standing for the Go version
	}{
		{name: "as released", info: BuildInfo{Version: "v1.2.3", Revision: "abc"}, want: `portcullis_build_info{fosite_patches="",go_version="%s",revision="abc",sdk_patches="",version="v1.2.3"} 1`},
		{name: "patched", info: BuildInfo{Version: "v1.2.3", Revision: "abc", SDKPatches: "p1,p2", FositePatches: "f1"}, want: `portcullis_build_info{fosite_patches="f1",go_version="%s",revision="abc",sdk_patches="p1,p2",version="v1.2.3"} 1`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			NewMetrics(reg, tt.info)
			want := `# HELP portcullis_build_info Always 1; the labels name the running build.
# TYPE portcullis_build_info gauge
` + fmt.Sprintf(tt.want, runtime.Version()) + "\n"
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "portcullis_build_info"); err != nil {
				t.Error(err)
			}
		})
	}
}
