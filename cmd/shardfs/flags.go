package main

import (
	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/cache"
	"github.com/shardfs/shardfs/prefetch"
	"github.com/shardfs/shardfs/store"
)

// env names the environment variable of a flag: SHARDFS_ plus the flag
// name in upper case with dashes as underscores.
func env(name string, more ...string) []string {
	b := []byte("SHARDFS_" + name)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return append([]string{string(b)}, more...)
}

func s3Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "endpoint-url", Usage: "S3 endpoint, e.g. http://127.0.0.1:9000 for MinIO (default: AWS)", EnvVars: env("endpoint-url", "AWS_ENDPOINT_URL"), Category: "S3"},
		&cli.StringFlag{Name: "region", Usage: "S3 region (default: from the AWS config, else us-east-1)", EnvVars: env("region", "AWS_REGION"), Category: "S3"},
		&cli.StringFlag{Name: "profile", Usage: "AWS shared-config profile for credentials", EnvVars: env("profile", "AWS_PROFILE"), Category: "S3"},
		&cli.BoolFlag{Name: "force-path-style", Usage: "address buckets as ENDPOINT/BUCKET (default: on when --endpoint-url is set)", EnvVars: env("force-path-style"), Category: "S3"},
		&cli.DurationFlag{Name: "retry-timeout", Value: store.DefaultRetryPolicy().Budget, Usage: "how long one read keeps retrying throttling, 5xx, resets and stalls before it fails with EIO", EnvVars: env("retry-timeout"), Category: "S3"},
		&cli.IntFlag{Name: "list-streams", Value: store.DefaultS3Options().ListStreams, Usage: "LIST streams at once: the top of SOURCE is listed with a delimiter and its directories in up to this many ranges together (1: one stream)", EnvVars: env("list-streams"), Category: "S3"},
		&cli.DurationFlag{Name: "stall-timeout", Value: store.DefaultS3Options().StallTimeout, Usage: "abandon and retry a GET whose body delivers no byte for this long", EnvVars: env("stall-timeout"), Category: "S3"},
	}
}

func cacheFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "cache-dir", Usage: "directory of the persistent NVMe ring cache, the persisted listing and member indexes (default: none, RAM tier only, indexes in memory)", EnvVars: env("cache-dir"), Category: "Cache"},
		&cli.StringFlag{Name: "cache-size", Value: formatSize(cache.DefaultSize), Usage: "bytes the ring cache may use on disk; never exceeded. Left out, a ring already in --cache-dir keeps its size and a new one takes at most 90% of the free space", EnvVars: env("cache-size"), Category: "Cache"},
		&cli.StringFlag{Name: "memory-cache-size", Value: formatSize(cache.DefaultMemorySize), Usage: "bytes of the RAM tier (0 disables it): blocks that random readers (map-style Datasets) come back to; on top of --prefetch-memory", EnvVars: env("memory-cache-size"), Category: "Cache"},
		&cli.IntFlag{Name: "whole-shard-percent", Value: cache.DefaultWholeShardPercent, Usage: "percent of --cache-size kept for complete shards as whole files, which the kernel reads itself (FUSE passthrough); the ring gets the rest (0: no whole files)", EnvVars: env("whole-shard-percent"), Category: "Cache"},
		&cli.StringFlag{Name: "block-size", Value: formatSize(cache.DefaultBlockSize), Usage: "cache block; random reads fetch whole blocks", EnvVars: env("block-size"), Category: "Cache"},
	}
}

func prefetchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "part-size", Value: formatSize(prefetch.DefaultPartSize), Usage: "size of each ranged GET on sequential reads and of the background fetch of a shard read densely at random (a multiple of --block-size)", EnvVars: env("part-size"), Category: "Read-ahead"},
		&cli.StringFlag{Name: "max-prefetch", Value: formatSize(prefetch.DefaultMaxPrefetch), Usage: "largest read-ahead window of one open file", EnvVars: env("max-prefetch"), Category: "Read-ahead"},
		&cli.StringFlag{Name: "prefetch-memory", Value: formatSize(prefetch.DefaultMemory), Usage: "bytes fetched ahead across all open files, together; readers wait when it is full", EnvVars: env("prefetch-memory"), Category: "Read-ahead"},
		&cli.StringFlag{Name: "memory-target", Usage: "most memory the daemon may hold: --prefetch-memory and --memory-cache-size left to their defaults are sized so that they and 128 MiB of room add up to it, and ones set are refused where they cannot fit (default: 75% of the cgroup's memory limit, or no target without one; never above that limit)", EnvVars: env("memory-target"), Category: "Read-ahead"},
		&cli.IntFlag{Name: "prefetch-next", Value: prefetch.DefaultNextShards, Usage: "shards after the current one (in listing order) to start fetching when a reader nears its end (0: none)", EnvVars: env("prefetch-next"), Category: "Read-ahead"},
		&cli.StringFlag{Name: "cache-lag", Value: cacheLagSkip, Usage: "when the cache disk takes blocks more slowly than the store brings them: skip (read-ahead blocks past the lag are served and not cached; the next pass caches them) or wait (readers wait for the disk). shardfs warm always waits", EnvVars: env("cache-lag"), Category: "Read-ahead"},
		&cli.IntFlag{Name: "max-concurrency", Value: prefetch.DefaultConcurrency, Usage: "parallel ranged GETs across the mount", EnvVars: env("max-concurrency"), Category: "Read-ahead"},
	}
}
