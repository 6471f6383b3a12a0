package main

import "github.com/logfs/logfs/storage"

// localIsolation is --isolation-level for a data directory (mount,
// consume): what record files and consume show of transactions.
func (c *clusterArgs) localIsolation() (storage.Isolation, error) {
	iso, err := storage.ParseIsolation(c.isolation)
	if err != nil {
		return 0, usageErrorf("--isolation-level %q: want read_committed or read_uncommitted", c.isolation)
	}
	return iso, nil
}
