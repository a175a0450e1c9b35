// Package listing owns a mount's listing: where it comes from and how it
// stays current.
//
// At mount, the listing is read from a manifest when one is given, else
// from a copy persisted in the cache directory when that copy is younger
// than the TTL (or the TTL is forever), else from the store's List, after
// which it is persisted there. The copy is keyed by the source (endpoint,
// bucket and prefix), so a remount of the same source on the same node
// sends no LIST at all, and a node that mounts many sources keeps one copy
// of each.
//
// With a TTL, a refresher goroutine lists the source again each time the
// listing reaches that age and hands the new listing to the mount. A
// refresh that fails (a 503, the endpoint down) keeps the listing that
// stands and is retried with exponential backoff, counted in Stats; it
// never empties or truncates the tree.
//
// This package never builds inodes (package fs does, from what it is
// handed), never reads object bytes and never decides what a changed
// object means for open files.
package listing
