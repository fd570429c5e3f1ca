package main

import (
	"context"
	"fmt"
	"strings"
)

// The virtual-server row (issue 34, goal 2): a Portcullis with the
// configuration of the portcullis row plus one virtual server, called on
// that server's path, where the built-in echo is exposed renamed and
// described. echo's only argument is the text it returns, which the
// response check compares with the text sent, so no argument is fixed: a
// fixed text would change the answer.
const (
	virtualRowName = "portcullis-virtual"
	virtualServer  = "bench"
	virtualPath    = "/mcp/bench"
	virtualTool    = "repeat"
)

// targetVirtualCPU is issue 34's goal: a call on a virtual server costs
// at most this multiple of the same call on /mcp in server CPU per call.
const targetVirtualCPU = 1.05

// virtualServers is the servers section of the virtual row's
// configuration: one server at virtualPath exposing core's echo as
// virtualTool, with a new title and description and its argument
// described, under the required scope and the per-tool policy /mcp has,
// so that the two rows' calls pass the same checks.
func virtualServers() string {
	return fmt.Sprintf(`servers:
  - name: %[1]s
    path: %[2]s
    title: Bench
    tools:
      - source: core
        name: echo
        expose_as: %[3]s
        title: Repeat
        description: Sends the text back as it came.
        arguments:
          text: {description: The text to send back.}
    auth:
      required_scopes: [%[4]s]
      policy:
        - tool: %[3]s
          scopes: [%[5]s]
`, virtualServer, virtualPath, virtualTool, scopeTools, scopeEcho)
}

// startVirtual starts the virtual row's Portcullis; its rows call
// virtualTool at virtualPath.
func (h *harness) startVirtual(ctx context.Context) (*server, error) {
	s, _, err := h.startPortcullisWith(ctx, pcOptions{name: virtualRowName, virtual: true})
	if err != nil {
		return nil, err
	}
	s.mcpPath, s.tool = virtualPath, virtualTool
	return s, nil
}

// virtualTable writes the virtual rows next to the portcullis rows of
// the same path and concurrency: throughput and server CPU per call of
// each, and the virtual row's CPU per call as a multiple of /mcp's, then
// whether the goal holds at c=16 on each path.
func (rep *report) virtualTable(b *strings.Builder) {
	var lines []string
	for _, path := range rep.cfg.paths {
		for _, conc := range rep.cfg.conc {
			root, ok1 := rep.find("portcullis", path, conc)
			virt, ok2 := rep.find(virtualRowName, path, conc)
			if !ok1 || !ok2 || root.requests == 0 || virt.requests == 0 {
				continue
			}
			lines = append(lines, fmt.Sprintf("| %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.3f |\n",
				path, conc, root.rps(), virt.rps(), ratio(virt.rps(), root.rps()),
				root.cpuPerReq(), virt.cpuPerReq(), ratio(virt.cpuPerReq(), root.cpuPerReq())))
		}
	}
	if len(lines) == 0 {
		return
	}
	b.WriteString("\n| virtual server | conc | /mcp req/s | " + virtualPath + " req/s | ÷ /mcp | /mcp CPU µs/call | " + virtualPath + " CPU µs/call | ÷ /mcp |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, l := range lines {
		b.WriteString(l)
	}
	b.WriteString("\n")
	if rep.cfg.smoke {
		b.WriteString("- smoke mode: CPU is read in 10 ms ticks, a few of them per row here, so the goal below is told only by measured rows (make bench-servers)\n")
	}
	for _, path := range rep.cfg.paths {
		root, ok1 := rep.find("portcullis", path, 16)
		virt, ok2 := rep.find(virtualRowName, path, 16)
		if !ok1 || !ok2 || root.cpuTicks == 0 {
			continue
		}
		r := virt.cpuPerReq() / root.cpuPerReq()
		fmt.Fprintf(b, "- a call on the virtual server costs ≤ %.2f× the same call on /mcp in server CPU (%s, c=16): %.3f× (%.0f µs against %.0f µs), %s\n",
			targetVirtualCPU, path, r, virt.cpuPerReq(), root.cpuPerReq(), yes(r <= targetVirtualCPU))
	}
}
