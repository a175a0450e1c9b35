"""shardfs.pipeline.GPUPrefetcher, the name gds/README.md gives: the class
lives in shardfs.gpu.prefetcher."""

from .gpu.prefetcher import GPUPrefetcher

__all__ = ["GPUPrefetcher"]
