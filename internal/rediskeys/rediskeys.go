// Package rediskeys deletes a key prefix from a Redis or a Redis Cluster:
// what a test or a rehearsal leaves behind.
//
// Overselling is neither prevented nor caused here (tests and rehearsals
// only).
package rediskeys

import (
	"context"

	"github.com/redis/rueidis"
)

// DeletePrefix deletes every key that starts with prefix: on the one
// server, or on every node of a cluster (each is scanned; each key is
// deleted through client, which sends it to the master that holds it).
// The rehearsal cleans up after itself with it, and the tests after them.
func DeletePrefix(ctx context.Context, client rueidis.Client, prefix string) error {
	for _, node := range client.Nodes() {
		var cursor uint64
		for {
			res, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				return err
			}
			for _, k := range res.Elements {
				if err := client.Do(ctx, client.B().Del().Key(k).Build()).Error(); err != nil {
					return err
				}
			}
			if res.Cursor == 0 {
				break
			}
			cursor = res.Cursor
		}
	}
	return nil
}
