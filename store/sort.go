package store

import (
	"sort"
	"strings"
)

func sortObjects(objs []Object) {
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
}

func compareKeys(a, b Object) int { return strings.Compare(a.Key, b.Key) }
