package tarindex

import "container/list"

// memory keeps rendered indexes within a byte bound, dropping the least
// recently used first. Not safe for concurrent use: Index guards it.
type memory struct {
	limit, used int64
	order       list.List // of *kept, most recent at the front
	byID        map[string]*list.Element
}

type kept struct {
	id   string
	data []byte
}

func newMemory(limit int64) *memory {
	return &memory{limit: limit, byID: map[string]*list.Element{}}
}

func (m *memory) get(id string) ([]byte, bool) {
	e, ok := m.byID[id]
	if !ok {
		return nil, false
	}
	m.order.MoveToFront(e)
	return e.Value.(*kept).data, true
}

// put keeps data under id unless it alone is over the bound.
func (m *memory) put(id string, data []byte) {
	if int64(len(data)) > m.limit {
		return
	}
	if e, ok := m.byID[id]; ok {
		m.used -= int64(len(e.Value.(*kept).data))
		m.order.Remove(e)
	}
	for m.used+int64(len(data)) > m.limit {
		last := m.order.Back()
		k := last.Value.(*kept)
		m.order.Remove(last)
		delete(m.byID, k.id)
		m.used -= int64(len(k.data))
	}
	m.byID[id] = m.order.PushFront(&kept{id: id, data: data})
	m.used += int64(len(data))
}
