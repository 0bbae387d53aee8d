package runtime

import (
	"sync"

	"github.com/weirstream/weir/internal/storage"
)

// StoreCache opens checkpoint stores by URL, once per URL: a barrier or a
// restore that came from another process names its store by URL only.
// It is safe for concurrent use.
type StoreCache struct {
	mu     sync.Mutex
	stores map[string]storage.Store
}

// NewStoreCache returns an empty cache.
func NewStoreCache() *StoreCache { return &StoreCache{stores: map[string]storage.Store{}} }

// Open returns the store of url, opening it on first use.
func (c *StoreCache) Open(url string) (storage.Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stores[url]; ok {
		return st, nil
	}
	st, err := storage.Open(url)
	if err != nil {
		return nil, err
	}
	c.stores[url] = st
	return st, nil
}
