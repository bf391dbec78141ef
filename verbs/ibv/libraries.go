package ibv

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// Library is one of rdma-core's libraries the provider loads at run time,
// as Libraries found it.
type Library struct {
	// Name is the library's name: "libibverbs" or "librdmacm".
	Name string
	// Soname is the name the provider asks dlopen for, "libibverbs.so.1".
	Soname string
	// Path is the file the dynamic loader mapped for it, as
	// /proc/self/maps shows it; empty when it did not load, or where the
	// system does not tell.
	Path string
	// Err says why the library could not be loaded: it matches
	// verbs.ErrNotSupported and names the packages to install. Nil when
	// it loaded.
	Err error
}

// mappedPath returns the path of the first file mapped into this process
// (maps: /proc/self/maps' contents) whose base name starts with prefix
// ("libibverbs.so"), "" when none is. The dynamic loader maps the file the
// soname resolved to, so this is where a deployment's library came from.
func mappedPath(maps *bufio.Scanner, prefix string) string {
	for maps.Scan() {
		// address perms offset dev inode pathname
		f := strings.Fields(maps.Text())
		if len(f) < 6 {
			continue
		}
		p := strings.Join(f[5:], " ")
		if strings.HasPrefix(filepath.Base(p), prefix) {
			return p
		}
	}
	return ""
}

// loadedPath is mappedPath over this process's maps.
func loadedPath(prefix string) string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	return mappedPath(bufio.NewScanner(f), prefix)
}

// InstallHint says which packages provide rdma-core's libraries: the text
// the provider's errors end with where they are missing.
const InstallHint = installHint
