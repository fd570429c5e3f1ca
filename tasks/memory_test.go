package tasks_test

import (
	"testing"

	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/portcullis-mcp/portcullis/tasks/storetest"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) tasks.Store { return tasks.NewMemoryStore(nil) })
}
