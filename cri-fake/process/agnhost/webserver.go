package agnhost

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"path"

	"github.com/spf13/pflag"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
)

// testWebserver follows test-webserver/test-webserver.go: net/http's FileServer over the
// container's / on --port (80), with its CORS and Cache-Control headers, If-Modified-Since
// dropped. The files are the container's view (image files, its own, its mounts), read when asked.
func testWebserver(p *kernel.Proc, flags *pflag.FlagSet) func([]string) int {
	port := flags.Int("port", 80, "Port number.")
	return func([]string) int {
		files := http.StripPrefix("/", http.FileServer(http.FS(containerFS{p})))
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "private")
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.Header().Set("Access-Control-Allow-Credentials", "true")
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "DNT,X-Mx-ReqToken,Keep-Alive,User-Agent,X-Requested-With,Cache-Control,Content-Type")
			r.Header.Del("If-Modified-Since")
			files.ServeHTTP(w, r)
		})
		srv, err := listenHTTP(p, *port, h, nil)
		if err != nil {
			// test-webserver.go:47: go log.Fatal(http.ListenAndServe(...)).
			return fatal(goLogger(p), "%s", listenError("tcp", *port, err))
		}
		srv.serve(p)
		return waitEnd(p)
	}
}

// containerFS is the container's file system as an fs.FS for net/http: a file is read whole
// (bounded by kernel.MaxHeldBytes: past it the server answers 500) so that it can seek, as
// http.ServeContent needs.
type containerFS struct{ p *kernel.Proc }

func (c containerFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	full := path.Join("/", name)
	st, err := c.p.FS().Stat(full)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return &dirFile{c: c, name: full, info: st}, nil
	}
	data, err := c.p.ReadFileBounded(full)
	if err != nil {
		return nil, err
	}
	return &memFile{Reader: bytes.NewReader(data), info: st}, nil
}

type memFile struct {
	*bytes.Reader
	info fs.FileInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

type dirFile struct {
	c    containerFS
	name string
	info fs.FileInfo
	read bool
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Close() error               { return nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: errors.New("is a directory")}
}

func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if d.read {
		if n > 0 {
			return nil, io.EOF
		}
		return nil, nil
	}
	d.read = true
	infos, err := d.c.p.FS().ReadDir(d.name)
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, len(infos))
	for i, st := range infos {
		out[i] = fs.FileInfoToDirEntry(st)
	}
	return out, nil
}
