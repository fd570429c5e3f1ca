package tasks_test

import (
	"context"
	"log"

	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/redis/go-redis/v9"
)

// Replicas that share one Redis share their tasks: a task created by one
// can be read, updated and cancelled through any other.
func ExampleNewRedisStore() {
	client := redis.NewClient(&redis.Options{Addr: "redis.internal:6379"})
	defer client.Close()
	store := tasks.NewRedisStore(client, "portcullis:", nil)
	defer store.Close()

	if err := store.Ping(context.Background()); err != nil {
		log.Fatal(err) // wraps tasks.ErrUnavailable
	}
	var _ tasks.Store = store
}
